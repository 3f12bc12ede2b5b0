import type { NewTask, TaskIndexEntry } from "./task.js";

/**
 * What the pure core asks the shell to persist, in order. Applying every effect of a
 * turn in one transaction makes storage match the core's memory exactly.
 */
export type Effect =
  /** Store a new task (state from `entry`). */
  | { kind: "insert"; task: NewTask; entry: TaskIndexEntry; createdAtMs: number }
  /** Persist an entry's new state and its lease columns, with optional outcome fields. */
  | { kind: "transition"; entry: TaskIndexEntry; outcome?: TransitionOutcome }
  /** Remove a task row. */
  | { kind: "delete"; id: string }
  /** Persist the queue's paused flag. */
  | { kind: "paused"; paused: boolean }
  /** Persist (or, undefined, forget) a rule key's dynamic limit. */
  | { kind: "slotLimit"; slot: string; limit: number | undefined };

export interface TransitionOutcome {
  lastError?: string;
  lastFailedAtMs?: number;
  finishedAtMs?: number;
  result?: Uint8Array;
  cancelReason?: string;
}

/** Lifecycle events for logs and metrics (the core does not log). */
export type CoreEvent =
  | { kind: "dispatched"; count: number }
  | { kind: "settled"; outcome: "completed" | "retry" | "archived" | "released" | "cancelled"; count: number }
  | { kind: "lease_expired"; leaseId: string; taskIds: string[] }
  /** An attempt reached its timeout or deadline: its lease was revoked, its tasks failed. */
  | { kind: "attempt_timed_out"; leaseId: string; taskIds: string[] }
  | { kind: "throttled" }
  | { kind: "rate_limited" }
  | { kind: "group_fired"; size: number }
  | { kind: "cancelled"; reason: "CONCURRENCY_LIMIT"; strategy: string };
