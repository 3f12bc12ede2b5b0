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
  | "UNAUTHENTICATED"
  | "PERMISSION_DENIED"
  | "INTERNAL";

/**
 * Stable reasons, one meaning each (docs/reference/errors.md lists them for users, generated from here).
 * A reason travels intact: server → ErrorInfo (or a batch item's ItemError) → SDK → CLI.
 */
export type ErrorReason =
  /** A request field is invalid; `field` names it. */
  | "INVALID_FIELD"
  /** The request's bytes are not a valid message of the method's type. */
  | "MALFORMED_REQUEST"
  /** No task has this id (or it was purged). */
  | "TASK_NOT_FOUND"
  /** The queue has no override of this limit (its concurrency limit or rate limit) to remove. */
  | "LIMIT_NOT_FOUND"
  /** The queue has no group config of this name (queue-wide default or one group's override) to remove. */
  | "GROUP_CONFIG_NOT_FOUND"
  /** The task type has no concurrency rules to remove. */
  | "RULES_NOT_FOUND"
  /** The queue has no schedule of this name. */
  | "SCHEDULE_NOT_FOUND"
  /** The queue holds as many schedules as SCHEDULES_PER_QUEUE_MAX allows. */
  | "SCHEDULES_FULL"
  /** No queue of this name exists: it has no settings row and no task. */
  | "QUEUE_NOT_FOUND"
  /** The queue still holds unfinished tasks, so it cannot be removed. */
  | "QUEUE_HAS_UNFINISHED_TASKS"
  /** An unfinished task of the queue holds the unique key. */
  | "UNIQUE_KEY_CONFLICT"
  /** The caller-chosen task id is already used by a task in another queue (in the same queue, an enqueue answers with the existing task). */
  | "TASK_ID_CONFLICT"
  /** The lease is not (or no longer) held: settled, expired, timed out, cancelled or replaced. */
  | "LEASE_NOT_HELD"
  /** The operator action does not apply to the task's current state. */
  | "TASK_STATE_CONFLICT"
  /**
   * The node holds as many parked Lease calls as `lease_waiters_max` allows, or as many
   * WaitTask calls as its limit (TASK_WAITERS_MAX); retry later.
   */
  | "WAITERS_FULL"
  /** A partition transfer (node to node) would buffer more than its cap at the receiver; the transfer is dropped and the sender retries later. */
  | "TRANSFER_TOO_LARGE"
  /** Another node owns the queue. */
  | "WRONG_OWNER"
  /**
   * The node that holds the queue's partition is down (its etcd registration is gone).
   * Its rows are only on its disk, so no other node serves the partition until it returns.
   */
  | "OWNER_DOWN"
  /** This node could not prove its cluster registration alive lately, so it acknowledges no write; retry (another node, or soon). */
  | "FENCED"
  /** The queue's partition changelog (cluster_nats) did not acknowledge the write, or is being re-read after a failed append; retry. */
  | "LOG_UNAVAILABLE"
  /** etcd (the cluster's coordination store) could not be reached or did not answer in time; retry. */
  | "ETCD_UNAVAILABLE"
  /** No cluster member is active, so no node may claim the queue's partition; retry. */
  | "NO_ACTIVE_MEMBER"
  /** The queue's partition is moving to another node and the move took longer than the call may wait; retry. */
  | "RELOCATING"
  /** No cluster member has this node id (`conveyor cluster drain` / `move`); `details.node` names it. */
  | "NODE_NOT_FOUND"
  /** A cluster operation (drain, move) on a single node, which has no etcd and no ring to change. */
  | "NOT_A_CLUSTER"
  /**
   * The drain or move would leave the cluster worse off: draining the last eligible member,
   * moving to a drained or inactive node, or moving a partition whose holder is down.
   */
  | "PLACEMENT_REFUSED"
  /** The queue's grain was deactivated (idle, a storage failure, shutdown) during the call; retry. */
  | "GRAIN_DEACTIVATED"
  /** The node is stopping and takes no new work; retry (another node, or after its restart). */
  | "NODE_STOPPING"
  /**
   * Client side only: no conveyor status came back (cannot connect, connection lost, the
   * call's deadline passed). Nothing says whether the server acted; retry idempotently.
   */
  | "UNREACHABLE"
  /**
   * Client side only: the TLS handshake failed (the node's certificate is not trusted or
   * not for this name, or the node wants a client certificate); the message says which.
   */
  | "TLS_FAILED"
  /** The data file could not be written for a reason that is not the caller's: retry. */
  | "STORAGE_FAILURE"
  /** The disk holding the data directory is full: retry once space is freed. */
  | "DISK_FULL"
  /** The data file refused this request's own values (a constraint): retrying cannot help. */
  | "STORAGE_REJECTED"
  /** The node requires a credential (a token or a client certificate) and the call had none. */
  | "CREDENTIALS_REQUIRED"
  /** The call's token or client certificate is not one the node knows. */
  | "CREDENTIALS_UNKNOWN"
  /** The caller's roles do not allow this call; `details` name what it needs. */
  | "ROLE_REQUIRED"
  /** A node forwarded a call for a caller identity this node will not act for (malformed, a node's, or from a node with auth off). */
  | "FORWARDED_IDENTITY_REFUSED"
  /** The caller's identity is scoped to queue patterns that leave out a queue this call touches (`details.queue`), or the call is about every queue. */
  | "QUEUE_NOT_IN_SCOPE"
  /** A bug on the server (logged there, never detailed to the caller), or a non-conveyor status. */
  | "INTERNAL";

/**
 * The status code each reason is sent with: the catalog's second column, read by the
 * generated error reference (docs/reference/errors.md); test/unit/docs.test.ts checks that
 * every `new ConveyorError(code, reason, ...)` in the code agrees with it.
 */
export const REASON_CODES: { readonly [R in ErrorReason]: ErrorCode } = {
  INVALID_FIELD: "INVALID_ARGUMENT",
  MALFORMED_REQUEST: "INVALID_ARGUMENT",
  TASK_NOT_FOUND: "NOT_FOUND",
  LIMIT_NOT_FOUND: "NOT_FOUND",
  GROUP_CONFIG_NOT_FOUND: "NOT_FOUND",
  RULES_NOT_FOUND: "NOT_FOUND",
  SCHEDULE_NOT_FOUND: "NOT_FOUND",
  SCHEDULES_FULL: "RESOURCE_EXHAUSTED",
  QUEUE_NOT_FOUND: "NOT_FOUND",
  QUEUE_HAS_UNFINISHED_TASKS: "FAILED_PRECONDITION",
  UNIQUE_KEY_CONFLICT: "ALREADY_EXISTS",
  TASK_ID_CONFLICT: "ALREADY_EXISTS",
  LEASE_NOT_HELD: "FAILED_PRECONDITION",
  TASK_STATE_CONFLICT: "FAILED_PRECONDITION",
  WAITERS_FULL: "RESOURCE_EXHAUSTED",
  TRANSFER_TOO_LARGE: "RESOURCE_EXHAUSTED",
  WRONG_OWNER: "UNAVAILABLE",
  OWNER_DOWN: "UNAVAILABLE",
  ETCD_UNAVAILABLE: "UNAVAILABLE",
  FENCED: "UNAVAILABLE",
  LOG_UNAVAILABLE: "UNAVAILABLE",
  NO_ACTIVE_MEMBER: "UNAVAILABLE",
  RELOCATING: "UNAVAILABLE",
  NODE_NOT_FOUND: "NOT_FOUND",
  NOT_A_CLUSTER: "FAILED_PRECONDITION",
  PLACEMENT_REFUSED: "FAILED_PRECONDITION",
  GRAIN_DEACTIVATED: "UNAVAILABLE",
  NODE_STOPPING: "UNAVAILABLE",
  UNREACHABLE: "UNAVAILABLE",
  TLS_FAILED: "UNAVAILABLE",
  STORAGE_FAILURE: "UNAVAILABLE",
  DISK_FULL: "RESOURCE_EXHAUSTED",
  STORAGE_REJECTED: "INVALID_ARGUMENT",
  CREDENTIALS_REQUIRED: "UNAUTHENTICATED",
  CREDENTIALS_UNKNOWN: "UNAUTHENTICATED",
  ROLE_REQUIRED: "PERMISSION_DENIED",
  FORWARDED_IDENTITY_REFUSED: "PERMISSION_DENIED",
  QUEUE_NOT_IN_SCOPE: "PERMISSION_DENIED",
  INTERNAL: "INTERNAL",
};

export class ConveyorError extends Error {
  override readonly name = "ConveyorError";
  /** The request field at fault, when there is one (e.g. "task.priority"). */
  readonly field?: string;
  constructor(
    readonly code: ErrorCode,
    readonly reason: ErrorReason,
    message: string,
    field?: string,
    /**
     * `cause`: what went wrong underneath (for the server log; never sent).
     * `details`: machine-readable facts about the error (e.g. WRONG_OWNER's owner and
     * ring version), sent as ErrorInfo metadata and rebuilt by clients.
     */
    options?: { cause?: unknown; details?: Readonly<Record<string, string>> },
  ) {
    // Well-formed Unicode: the message travels in a header that grpc-js URI-encodes, and
    // a lone surrogate (a quoted value, or a parser's message cutting an emoji in half)
    // made encodeURI throw and the whole node exit.
    super(wellFormed(message), options?.cause === undefined ? undefined : { cause: options.cause });
    if (field !== undefined) this.field = wellFormed(field);
    if (options?.details && Object.keys(options.details).length > 0) {
      this.details = Object.fromEntries(Object.entries(options.details).map(([k, v]) => [k, wellFormed(v)]));
    }
  }

  /** Machine-readable facts about the error, when it has any (never the field: see `field`). */
  readonly details?: Readonly<Record<string, string>>;
}

/** `text` with every lone surrogate replaced by U+FFFD (String.prototype.toWellFormed, ES2024). */
const wellFormed = (text: string) => text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");

export const invalidField = (field: string, message: string) =>
  new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `${field}: ${message}`, field);

/** Messages quote a caller's value through `quote`: a short prefix at most. */
export const taskNotFound = (id: string) =>
  new ConveyorError("NOT_FOUND", "TASK_NOT_FOUND", `task ${quote(id)} not found`);

/** A string field over its limit. */
export const tooLong = (field: string, value: string, maxChars: number) =>
  invalidField(field, `is ${value.length} characters; the limit is ${maxChars}`);

export const queueNotFound = (queue: string) =>
  new ConveyorError("NOT_FOUND", "QUEUE_NOT_FOUND", `queue ${quote(queue)} not found`);

export const nodeStopping = () =>
  new ConveyorError("UNAVAILABLE", "NODE_STOPPING", "the node is stopping; retry");

export const grainDeactivated = (queue: string) =>
  new ConveyorError("UNAVAILABLE", "GRAIN_DEACTIVATED", `queue ${quote(queue)} was being reloaded; retry`);

/**
 * The queue is owned by another node. `details` name the owner and the ring version the
 * answer was computed with, so a client or a forwarding node can tell a stale route from
 * a real change without parsing the text.
 */
export const wrongOwner = (what: string, owner: string, ringVersion: number) =>
  new ConveyorError("UNAVAILABLE", "WRONG_OWNER", `${what} is served by node ${owner || "(none yet)"}, not this one; retry`, undefined,
    { details: { owner, ringVersion: String(ringVersion) } });

/** How errors name a queue: `queue "billing"` (quoted and cut as every caller value is). */
export const queueLabel = (queue: string) => `queue ${quote(queue)}`;

/** The owner of the queue's partition is down (see the OWNER_DOWN reason); `details` name it. */
export const ownerDown = (what: string, partition: number, owner: string) =>
  new ConveyorError("UNAVAILABLE", "OWNER_DOWN",
    `${what} is in partition ${partition}, held by node ${owner}, which is down; it is served again when that node returns with its data`,
    undefined, { details: { owner, partition: String(partition) } });

export const fenced = (nodeId: string) =>
  new ConveyorError("UNAVAILABLE", "FENCED", `node ${nodeId} cannot prove its cluster registration alive and acknowledges no write now; retry`);

/** etcd failed a call this one needed (unreachable, timed out, no leader); the cause stays in the server log. */
export const etcdUnavailable = (cause: unknown) =>
  new ConveyorError("UNAVAILABLE", "ETCD_UNAVAILABLE", "etcd (the cluster's coordination store) did not answer; retry", undefined, { cause });

export const relocating = (p: number) =>
  new ConveyorError("UNAVAILABLE", "RELOCATING", `partition ${p} is moving to another node; retry in a moment`, undefined, { details: { partition: String(p), retryAfterMs: "200" } });

export const noActiveMember = (what: string) =>
  new ConveyorError("UNAVAILABLE", "NO_ACTIVE_MEMBER", `${what}: no cluster member is active to serve it; retry`);

export const nodeNotFound = (nodeId: string) =>
  new ConveyorError("NOT_FOUND", "NODE_NOT_FOUND", `no cluster member is node ${quote(nodeId)}`, "node_id", { details: { node: nodeId } });

export const notACluster = () =>
  new ConveyorError("FAILED_PRECONDITION", "NOT_A_CLUSTER", "not a cluster: this node runs alone (no cluster_etcd), so it has no ring to drain or move partitions on");

export const placementRefused = (message: string) => new ConveyorError("FAILED_PRECONDITION", "PLACEMENT_REFUSED", message);

/**
 * The error a caller gets for writes whose commit failed: the storage layer's own
 * ConveyorError (DISK_FULL, STORAGE_FAILURE, ...) as it is; anything else as a retryable
 * STORAGE_FAILURE (the cause is kept for the server log, never sent).
 */
export function asStorageFailure(error: unknown): ConveyorError {
  if (error instanceof ConveyorError) return error;
  return new ConveyorError("UNAVAILABLE", "STORAGE_FAILURE", "the write was not committed; retry", undefined, { cause: error });
}
