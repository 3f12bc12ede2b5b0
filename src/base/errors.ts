/**
 * The error catalog. Every failure a caller can act on is a ConveyorError with a gRPC
 * status code and a stable reason; the server maps it to a gRPC status (with ErrorInfo
 * in the details trailer) and the SDK maps it back. Anything else is a bug and becomes
 * INTERNAL with the cause logged, never sent.
 */
export type ErrorCode =
  | "INVALID_ARGUMENT"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "FAILED_PRECONDITION"
  | "RESOURCE_EXHAUSTED"
  | "UNAVAILABLE"
  | "INTERNAL";

/** Stable reasons, one meaning each. */
export type ErrorReason =
  | "INVALID_FIELD"
  | "TASK_NOT_FOUND"
  | "LIMIT_NOT_FOUND"
  | "UNIQUE_KEY_CONFLICT"
  | "TASK_ID_CONFLICT"
  | "LEASE_NOT_HELD"
  | "TASK_STATE_CONFLICT"
  | "WAITERS_FULL"
  | "WRONG_OWNER"
  | "STORAGE_FAILURE"
  | "INTERNAL";

export class ConveyorError extends Error {
  override readonly name = "ConveyorError";
  /** The request field at fault, when there is one (e.g. "task.priority"). */
  readonly field?: string;
  constructor(
    readonly code: ErrorCode,
    readonly reason: ErrorReason,
    message: string,
    field?: string,
  ) {
    // Well-formed Unicode: the message travels in a header that grpc-js URI-encodes, and
    // a lone surrogate (a quoted value, or a parser's message cutting an emoji in half)
    // made encodeURI throw and the whole node exit.
    super(wellFormed(message));
    if (field !== undefined) this.field = wellFormed(field);
  }
}

/** `text` with every lone surrogate replaced by U+FFFD (String.prototype.toWellFormed, ES2024). */
const wellFormed = (text: string) => text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");

export const invalidField = (field: string, message: string) =>
  new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `${field}: ${message}`, field);

export const taskNotFound = (id: string) =>
  new ConveyorError("NOT_FOUND", "TASK_NOT_FOUND", `task ${JSON.stringify(id)} not found`);
