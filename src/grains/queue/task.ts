import type { TaskState } from "../../base/task-state.js";
import type { TaskRule } from "./rules.js";

/**
 * Domain types of the queue grain. Nothing here knows about protobuf, gRPC or SQLite:
 * the server translates wire messages to these, the storage layer persists them.
 */

/** Lifecycle states (base/task-state.ts; the client SDK shows the same list). */
export type { TaskState };

export const TASK_STATES: readonly TaskState[] = [
  "scheduled", "pending", "aggregating", "active", "retry", "completed", "archived", "cancelled",
];

/** States a task never leaves on its own (an operator may still retry or delete it). */
export const FINISHED_STATES: ReadonlySet<TaskState> = new Set(["completed", "archived", "cancelled"]);

export type Outcome = "success" | "retry" | "skip_retry" | "released";

/** Why a task was cancelled. */
export type CancelReason = "OPERATOR" | "CONCURRENCY_LIMIT";

/**
 * A validated request to create a task, with every default resolved and every relative
 * time made absolute by the server, so the grain decides with plain numbers.
 */
export interface NewTask {
  id: string;
  /** True when the caller chose the id (idempotent enqueue). */
  idChosen: boolean;
  queue: string;
  type: string;
  payload: Uint8Array;
  contentType: string;
  metadata: Record<string, string>;
  priority: number;
  maxRetry: number;
  timeoutMs: number;
  deadlineAtMs: number;
  /** When the task may first run; ≤ now means at once. */
  processAtMs: number;
  uniqueKey: string;
  /** 0: the unique key is held until the task finishes. */
  uniqueTtlMs: number;
  retentionMs: number;
  expiresAtMs: number;
  concurrencyKey: string;
  group: string;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Concurrency rules of the task's type, evaluated for this task. */
  rules: TaskRule[];
  /** Set when a rule expression failed: the task is stored archived with this error. */
  ruleError: string;
}

/** The full stored view of a task. */
export interface TaskRecord {
  id: string;
  queue: string;
  type: string;
  payload: Uint8Array;
  contentType: string;
  metadata: Record<string, string>;
  state: TaskState;
  priority: number;
  /** Dispatch order within a priority; assigned when the task becomes pending. */
  seq: number;
  maxRetry: number;
  retried: number;
  createdAtMs: number;
  readyAtMs: number;
  timeoutMs: number;
  deadlineAtMs: number;
  expiresAtMs: number;
  uniqueKey: string;
  /** 0: held while unfinished. */
  uniqueUntilMs: number;
  concurrencyKey: string;
  group: string;
  backoffBaseMs: number;
  backoffMaxMs: number;
  retentionMs: number;
  lastError: string;
  lastFailedAtMs: number;
  finishedAtMs: number;
  result: Uint8Array;
  cancelReason: string;
  /** Concurrency rules evaluated for this task at enqueue. */
  rules: TaskRule[];
  leaseId: string;
  leaseExpiresAtMs: number;
  /** How many attempts the task has started (its attempt history numbers on from it). */
  attemptNumber: number;
}

/**
 * What the grain keeps in memory per unfinished task: enough to dispatch, gate, expire
 * and retry it, never the payload. Rebuilt from storage on activation.
 */
export interface TaskIndexEntry {
  id: string;
  state: TaskState;
  type: string;
  priority: number;
  seq: number;
  concurrencyKey: string;
  readyAtMs: number;
  timeoutMs: number;
  deadlineAtMs: number;
  expiresAtMs: number;
  uniqueKey: string;
  uniqueUntilMs: number;
  retried: number;
  maxRetry: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  leaseId: string;
  leaseExpiresAtMs: number;
  /**
   * When the node ends the running attempt (the earlier of its lease time + timeout and
   * the task's deadline; for a batch, the earliest of its members'); 0 when there is no
   * limit or the task is not active. Durable, so a restart does not extend an attempt.
   */
  attemptEndsAtMs: number;
  /** When the running attempt started; 0 when the task is not active. Durable (attempt history). */
  attemptStartedAtMs: number;
  /** The worker id of the Lease call that started the running attempt ("" = none named, or not active). */
  attemptWorker: string;
  /** How many attempts the task has started (the running or last one's number). Durable, kept by a revival. */
  attemptNumber: number;
  /** Aggregation group ("" = none). */
  group: string;
  /** The fired batch this pending or active group member belongs to ("" = none). */
  batchId: string;
  /** Concurrency rules evaluated for this task at enqueue. */
  rules: TaskRule[];
  /** Size of the payload: a Lease answer stops growing at a byte budget. */
  payloadBytes: number;
}

/** The fields an index entry copies from its task (a NewTask and a TaskRecord both have them). */
export type EntryTaskFields = Pick<TaskIndexEntry, "id" | "type" | "priority" | "concurrencyKey" | "timeoutMs"
  | "deadlineAtMs" | "uniqueKey" | "maxRetry" | "backoffBaseMs" | "backoffMaxMs" | "group" | "rules">;

/** Where the task stands (and its payload's size, which the entry keeps instead of the payload); the attempt fields default to "never failed, not leased, no batch". */
export type EntryPosition = Pick<TaskIndexEntry, "state" | "seq" | "readyAtMs" | "expiresAtMs" | "uniqueUntilMs" | "payloadBytes">
  & Partial<Pick<TaskIndexEntry, "retried" | "leaseId" | "leaseExpiresAtMs" | "attemptEndsAtMs" | "attemptStartedAtMs" | "attemptWorker" | "attemptNumber" | "batchId">>;

/**
 * The one constructor of an index entry: admission (a NewTask), revival (a TaskRecord)
 * and activation (a stored row) all build entries here, so a new field is added once.
 * Only the entry's own fields are copied (never a payload).
 */
export function indexEntry(task: EntryTaskFields, at: EntryPosition): TaskIndexEntry {
  return {
    id: task.id, state: at.state, type: task.type, priority: task.priority, seq: at.seq,
    concurrencyKey: task.concurrencyKey, readyAtMs: at.readyAtMs, timeoutMs: task.timeoutMs,
    deadlineAtMs: task.deadlineAtMs, expiresAtMs: at.expiresAtMs, uniqueKey: task.uniqueKey,
    uniqueUntilMs: at.uniqueUntilMs, retried: at.retried ?? 0, maxRetry: task.maxRetry,
    backoffBaseMs: task.backoffBaseMs, backoffMaxMs: task.backoffMaxMs, leaseId: at.leaseId ?? "",
    leaseExpiresAtMs: at.leaseExpiresAtMs ?? 0, attemptEndsAtMs: at.attemptEndsAtMs ?? 0,
    attemptStartedAtMs: at.attemptStartedAtMs ?? 0, attemptWorker: at.attemptWorker ?? "",
    attemptNumber: at.attemptNumber ?? 0, group: task.group,
    batchId: at.batchId ?? "", rules: task.rules, payloadBytes: at.payloadBytes,
  };
}
