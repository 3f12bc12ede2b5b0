/**
 * The error catalog. Every failure a caller can act on is a ConveyorError with a gRPC
 * status code and a stable reason; the server maps it to a gRPC status (with ErrorInfo
 * in the details trailer) and the SDK maps it back. Anything else is a bug and becomes
 * INTERNAL with the cause logged, never sent.
 */
import { quote } from "./limits.js";

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
  /** The request's bytes are not a valid message of the method's type. */
  | "MALFORMED_REQUEST"
  | "TASK_NOT_FOUND"
  | "LIMIT_NOT_FOUND"
  | "UNIQUE_KEY_CONFLICT"
  | "TASK_ID_CONFLICT"
  | "LEASE_NOT_HELD"
  | "TASK_STATE_CONFLICT"
  | "WAITERS_FULL"
  | "WRONG_OWNER"
  /** The queue's grain was deactivated (idle, a storage failure, shutdown) during the call; retry. */
  | "GRAIN_DEACTIVATED"
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
    /**
     * `cause`: what went wrong underneath (for the server log; never sent).
     * `details`: machine-readable facts about the error (e.g. WRONG_OWNER's owner and
     * ring version), sent as ErrorInfo metadata and rebuilt by clients.
     */
    options?: { cause?: unknown; details?: Readonly<Record<string, string>> },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    if (options?.details && Object.keys(options.details).length > 0) this.details = options.details;
  }

  /** Machine-readable facts about the error, when it has any (never the field: see `field`). */
  readonly details?: Readonly<Record<string, string>>;
}

export const invalidField = (field: string, message: string) =>
  new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `${field}: ${message}`, field);

/** Messages quote a caller's value through `quote`: a short prefix at most. */
export const taskNotFound = (id: string) =>
  new ConveyorError("NOT_FOUND", "TASK_NOT_FOUND", `task ${quote(id)} not found`);

/** A string field over its limit. */
export const tooLong = (field: string, value: string, maxChars: number) =>
  invalidField(field, `is ${value.length} characters; the limit is ${maxChars}`);

export const grainDeactivated = (queue: string) =>
  new ConveyorError("UNAVAILABLE", "GRAIN_DEACTIVATED", `queue ${quote(queue)} was being reloaded; retry`);

/**
 * The queue is owned by another node. `details` name the owner and the ring version the
 * answer was computed with, so a client or a forwarding node can tell a stale route from
 * a real change without parsing the text.
 */
export const wrongOwner = (queue: string, owner: string, ringVersion: number) =>
  new ConveyorError("UNAVAILABLE", "WRONG_OWNER", `queue ${quote(queue)} is owned by node ${owner}`, undefined,
    { details: { owner, ringVersion: String(ringVersion) } });
