/**
 * Requests that do not decode are the caller's fault: INVALID_ARGUMENT naming the field
 * when one can be named (a string that is not UTF-8), never INTERNAL.
 *
 * grpc-js answers INTERNAL when a request deserializer throws, so the server's
 * deserializer never throws: it returns an `UndecodableRequest` that the handler turns
 * into the error. (The JSON API needs nothing of the kind: protobuf-es's fromJson already
 * refuses strings with no UTF-8 form, and json-api.ts refuses a body that is not UTF-8.)
 */
import { isUtf8 } from "node:buffer";
import { fromBinary, ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { ConveyorError, invalidField } from "../base/errors.js";
import { REQUEST_NESTING_MAX_DEPTH, truncateText } from "../base/limits.js";
import { HAND_DECODED } from "./fast-decode.js";
import { wireShapeRefusal } from "./wire-shape.js";

/** What the server's deserializer returns for bytes that are not a valid request. */
export class UndecodableRequest {
  constructor(readonly error: ConveyorError) {}
}

/** Decodes a request, or describes why it does not decode. */
export function decodeRequest(schema: DescMessage, bytes: Uint8Array): unknown {
  // The enqueue requests by hand when they are ordinary (fast-decode.ts); anything else, and
  // anything that does not decode, through protobuf-es.
  const fast = HAND_DECODED.get(schema.typeName)?.(bytes);
  if (fast !== undefined) return fast;
  // Before protobuf-es: shapes whose decoding costs more than their bytes (deep nesting, groups).
  const refusal = wireShapeRefusal(schema, bytes, REQUEST_NESTING_MAX_DEPTH);
  if (refusal !== undefined) {
    return new UndecodableRequest(new ConveyorError("INVALID_ARGUMENT", "MALFORMED_REQUEST", `the request does not decode as ${schema.typeName}: ${refusal}`));
  }
  try {
    return fromBinary(schema, bytes);
  } catch (e) {
    const field = findInvalidUtf8(schema, bytes, "", 0);
    if (field !== undefined) return new UndecodableRequest(invalidField(field, "is not valid UTF-8"));
    return new UndecodableRequest(new ConveyorError("INVALID_ARGUMENT", "MALFORMED_REQUEST",
      `the request does not decode as ${schema.typeName}: ${truncateText((e as Error).message, 200)}`));
  }
}

const MAX_DEPTH = 32;

/** The path of the first string field (in wire order) whose bytes are not UTF-8. */
function findInvalidUtf8(desc: DescMessage, bytes: Uint8Array, path: string, depth: number): string | undefined {
  if (depth > MAX_DEPTH) return undefined;
  try {
    const reader = new BinaryReader(bytes);
    const seen = new Map<number, number>();
    while (reader.pos < reader.len) {
      const [no, wireType] = reader.tag();
      const field = desc.fields.find((f) => f.number === no);
      if (!field || wireType !== WireType.LengthDelimited) {
        reader.skip(wireType, no);
        continue;
      }
      const data = reader.bytes();
      const index = seen.get(no) ?? 0;
      seen.set(no, index + 1);
      const found = checkField(field, data, path === "" ? field.name : `${path}.${field.name}`, index, depth);
      if (found !== undefined) return found;
    }
  } catch {
    // Not decodable for another reason: no field to name.
  }
  return undefined;
}

function checkField(field: DescField, data: Uint8Array, name: string, index: number, depth: number): string | undefined {
  switch (field.fieldKind) {
    case "scalar":
      return field.scalar === ScalarType.STRING && !isUtf8(data) ? name : undefined;
    case "message":
      return findInvalidUtf8(field.message, data, name, depth + 1);
    case "list":
      if (field.listKind === "scalar") return field.scalar === ScalarType.STRING && !isUtf8(data) ? `${name}[${index}]` : undefined;
      if (field.listKind === "message") return findInvalidUtf8(field.message, data, `${name}[${index}]`, depth + 1);
      return undefined;
    case "map": {
      // An entry is a message with the key as field 1 and the value as field 2.
      const reader = new BinaryReader(data);
      while (reader.pos < reader.len) {
        const [no, wireType] = reader.tag();
        if (wireType !== WireType.LengthDelimited) {
          reader.skip(wireType, no);
          continue;
        }
        const part = reader.bytes();
        if (no === 1 && field.mapKey === ScalarType.STRING && !isUtf8(part)) return name;
        if (no === 2 && field.mapKind === "scalar" && field.scalar === ScalarType.STRING && !isUtf8(part)) return name;
        if (no === 2 && field.mapKind === "message") {
          const found = findInvalidUtf8(field.message, part, name, depth + 1);
          if (found !== undefined) return found;
        }
      }
      return undefined;
    }
    default:
      return undefined;
  }
}
