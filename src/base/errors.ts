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
  /** The data file could not be written for a reason that is not the caller's: retry. */
  | "STORAGE_FAILURE"
  /** The disk holding the data directory is full: retry once space is freed. */
  | "DISK_FULL"
  /** The data file refused this request's own values (a constraint): retrying cannot help. */
  | "STORAGE_REJECTED"
  | "INTERNAL";

export class ConveyorError extends Error {
  override readonly name = "ConveyorError";
  constructor(
    readonly code: ErrorCode,
    readonly reason: ErrorReason,
    message: string,
    /** The request field at fault, when there is one (e.g. "task.priority"). */
    readonly field?: string,
    /** What went wrong underneath (for the server log; never sent). */
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export const invalidField = (field: string, message: string) =>
  new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `${field}: ${message}`, field);

export const taskNotFound = (id: string) =>
  new ConveyorError("NOT_FOUND", "TASK_NOT_FOUND", `task ${JSON.stringify(id)} not found`);
