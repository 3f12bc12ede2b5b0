/**
 * The one JSON form of conveyor's protobuf messages, shared by the node's JSON API
 * (src/server/json-api.ts) and the CLI's `--json` output: the protobuf JSON mapping
 * with every field present (defaults included), so a script sees the same shape from
 * both. In that mapping 64-bit integers are strings ("1767225600000"), enums are their
 * proto names ("TASK_STATE_PENDING") and bytes are base64.
 */
import { create, toJson, type DescMessage, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";

export function toApiJson<Desc extends DescMessage>(schema: Desc, message: MessageInitShape<Desc>): JsonValue {
  return toJson(schema, create(schema, message), { alwaysEmitImplicit: true });
}
