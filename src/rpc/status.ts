/**
 * ConveyorError ↔ gRPC status. The server sends the code, the message, and a
 * google.rpc.Status with an ErrorInfo (stable reason; metadata: the field at fault and
 * the error's details, e.g. WRONG_OWNER's owner and ring version) in the
 * `grpc-status-details-bin` trailer; clients rebuild the same ConveyorError.
 */
import * as grpc from "@grpc/grpc-js";
import { anyPack, anyUnpack } from "@bufbuild/protobuf/wkt";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ConveyorError, type ErrorCode, type ErrorReason } from "../base/errors.js";
import { STATUS_MESSAGE_MAX_BYTES, truncateText } from "../base/limits.js";
import { ErrorInfoSchema, StatusSchema, type Status } from "../gen/google/rpc/status_pb.js";
import { ItemErrorSchema, type ItemError } from "../gen/conveyor/v1/task_pb.js";
import { explainTlsFailure } from "./tls-errors.js";

const DOMAIN = "conveyor.dev";
const DETAILS_KEY = "grpc-status-details-bin";
/** ErrorInfo metadata key of the field at fault; every other key is one of the error's `details`. */
const FIELD_KEY = "field";
/** Each detail value travels in a header too; details are short facts (ids, versions). */
const DETAIL_MAX_BYTES = 256;

const CODE_TO_GRPC: Record<ErrorCode, grpc.status> = {
  INVALID_ARGUMENT: grpc.status.INVALID_ARGUMENT,
  NOT_FOUND: grpc.status.NOT_FOUND,
  ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  FAILED_PRECONDITION: grpc.status.FAILED_PRECONDITION,
  RESOURCE_EXHAUSTED: grpc.status.RESOURCE_EXHAUSTED,
  UNAVAILABLE: grpc.status.UNAVAILABLE,
  UNAUTHENTICATED: grpc.status.UNAUTHENTICATED,
  PERMISSION_DENIED: grpc.status.PERMISSION_DENIED,
  INTERNAL: grpc.status.INTERNAL,
};

export function grpcCodeOf(code: ErrorCode): grpc.status {
  return CODE_TO_GRPC[code];
}

export function errorCodeOf(code: number): ErrorCode {
  for (const [name, value] of Object.entries(CODE_TO_GRPC)) if (value === code) return name as ErrorCode;
  return code === grpc.status.DEADLINE_EXCEEDED || code === grpc.status.CANCELLED ? "UNAVAILABLE" : "INTERNAL";
}

/**
 * A grpc-js service error for `err`; anything that is not a ConveyorError is INTERNAL.
 * The message and field travel as HTTP/2 headers (grpc-message and the details
 * trailer), so they are cut to STATUS_MESSAGE_MAX_BYTES: a message that quoted a huge
 * caller value must not stall the connection (messages quote short prefixes anyway).
 */
export function toServiceError(err: unknown): Partial<grpc.StatusObject> {
  const status = toStatus(err);
  const metadata = new grpc.Metadata();
  metadata.set(DETAILS_KEY, Buffer.from(toBinary(StatusSchema, status)));
  return { code: status.code, details: status.message, metadata };
}

/**
 * The google.rpc.Status of `err` (code, cut message, ErrorInfo): what the details trailer
 * of a unary call carries, and what a session answer carries in its `error`.
 */
export function toStatus(err: unknown): Status {
  const e = err instanceof ConveyorError
    ? err
    : new ConveyorError("INTERNAL", "INTERNAL", "internal error; see the server log");
  const message = truncateText(e.message, STATUS_MESSAGE_MAX_BYTES);
  const infoMetadata: Record<string, string> = {};
  Object.assign(infoMetadata, detailsOf(e));
  if (e.field) infoMetadata[FIELD_KEY] = truncateText(e.field, STATUS_MESSAGE_MAX_BYTES);
  const info = create(ErrorInfoSchema, { reason: e.reason, domain: DOMAIN, metadata: infoMetadata });
  return create(StatusSchema, { code: grpcCodeOf(e.code), message, details: [anyPack(ErrorInfoSchema, info)] });
}

/**
 * One item's error inside a batch answer (EnqueueBatch, Settle): the same code, reason,
 * message and field a whole-call error carries. `fromItemError` is its inverse.
 */
export function toItemError(e: ConveyorError): ItemError {
  return create(ItemErrorSchema, { code: grpcCodeOf(e.code), reason: e.reason, message: e.message, field: e.field ?? "", details: detailsOf(e) });
}

/** The error's details, each value cut as a whole-call error's are. */
function detailsOf(e: ConveyorError): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(e.details ?? {})) out[key] = truncateText(value, DETAIL_MAX_BYTES);
  return out;
}

/** Rebuilds a ConveyorError from a batch item's error (an absent one is INTERNAL). */
export function fromItemError(e: ItemError | undefined): ConveyorError {
  const details = e && Object.keys(e.details).length > 0 ? { details: e.details } : undefined;
  return new ConveyorError(errorCodeOf(e?.code ?? grpc.status.INTERNAL), (e?.reason || "INTERNAL") as ErrorReason,
    e?.message ?? "unknown error", e?.field || undefined, details);
}

/** Codes grpc-js reports itself when no answer came back from the server. */
const TRANSPORT_CODES: ReadonlySet<number> = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.CANCELLED]);

/**
 * Rebuilds a ConveyorError from a grpc-js client error. A status without conveyor's
 * ErrorInfo did not come from a conveyor handler: with a transport code it is
 * `UNREACHABLE` (the client's own failure), otherwise `INTERNAL`.
 */
export function fromServiceError(err: grpc.ServiceError): ConveyorError {
  const raw = err.metadata?.get(DETAILS_KEY)[0];
  let status: Status | undefined;
  if (raw instanceof Buffer) {
    try {
      status = fromBinary(StatusSchema, raw);
    } catch {
      // Not our trailer: keep the plain status.
    }
  }
  return fromStatusParts(err.code, err.details || err.message, status);
}

/** Rebuilds the ConveyorError of a session answer's `error` (the inverse of `toStatus`). */
export function fromStatus(status: Status): ConveyorError {
  return fromStatusParts(status.code, status.message, status);
}

function fromStatusParts(code: number, statusMessage: string, status: Status | undefined): ConveyorError {
  let reason: ErrorReason = TRANSPORT_CODES.has(code) ? "UNREACHABLE" : "INTERNAL";
  let field: string | undefined;
  let details: Record<string, string> | undefined;
  try {
    for (const detail of status?.details ?? []) {
      const info = anyUnpack(detail, ErrorInfoSchema);
      if (info) {
        reason = info.reason as ErrorReason;
        const { [FIELD_KEY]: infoField, ...rest } = info.metadata;
        field = infoField;
        details = Object.keys(rest).length > 0 ? rest : undefined;
      }
    }
  } catch {
    // Not our ErrorInfo: keep the plain status.
  }
  let message = statusMessage;
  const tls = reason === "UNREACHABLE" ? explainTlsFailure(message) : undefined;
  if (tls) [reason, message] = ["TLS_FAILED", tls];
  return new ConveyorError(errorCodeOf(code), reason, message, field, details ? { details } : undefined);
}
