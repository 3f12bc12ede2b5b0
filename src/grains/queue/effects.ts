import type { AttemptOutcome } from "./attempts.js";
import type { GroupConfig } from "./group-aggregator.js";
import type { ScheduleState } from "./schedule.js";
import type { NewTask, TaskIndexEntry } from "./task.js";
import type { RateLimitSpec } from "./token-bucket.js";

/**
 * What the pure core asks the shell to persist, in order: one named transition per
 * change of durable state. Applying every effect of a turn in one transaction makes
 * storage match the core's memory exactly.
 *
 * Why named: each kind maps to exactly one prepared statement in the store
 * (storage/task-store.ts), so the store never guesses a statement from a value's shape,
 * and a new reason to write a row is a new name, not a silent reuse of another's
 * statement. Why self-contained: every value a statement writes is in the effect, computed
 * by the core (instants included); nothing is read from a clock while applying. This is
 * the record format a replica will apply.
 *
 * A task transition carries the entry as the core left it (`entry`, a copy) and the
 * outcome fields that only that transition writes.
 */
export type Effect = TaskTransition | AttemptEffect | QueueSettingEffect | ScheduleEffect;

/**
 * An attempt ended (written in the turn of the transition it caused; the task's row is
 * not rewritten for it). The error is already cut to ATTEMPT_ERROR_MAX_BYTES.
 */
export type AttemptEffect = {
  kind: "recordAttempt"; taskId: string; number: number; startedAtMs: number; endedAtMs: number; workerId: string;
  /** The lease the attempt ended under ('' if none): a settle of it sent again is recognised by it. */
  leaseId: string;
  outcome: AttemptOutcome; error: string;
  /** The failure's stack trace (cut to ATTEMPT_STACK_MAX_BYTES); absent when the worker sent none. */
  stack?: string;
};

export type TaskTransition =
  /** Store a new task (its state is `entry.state`). */
  | { kind: "insert"; task: NewTask; entry: TaskIndexEntry; createdAtMs: number }
  /** pending → active: a lease was handed out (the store reads the delivered row back). */
  | { kind: "activate"; entry: TaskIndexEntry }
  /** active → completed: the handler succeeded. */
  | { kind: "complete"; entry: TaskIndexEntry; outcome: { finishedAtMs: number; result: Uint8Array } }
  /** active → retry: a failed or timed-out attempt backs off until `entry.readyAtMs`. */
  | { kind: "retry"; entry: TaskIndexEntry; outcome: FailureOutcome }
  /** active → pending at its old place: the lease lapsed (the worker stopped heartbeating). */
  | { kind: "requeue"; entry: TaskIndexEntry; outcome: FailureOutcome }
  /** active → pending at its old place, no retry spent: the worker gave the task back. */
  | { kind: "release"; entry: TaskIndexEntry }
  /** scheduled/retry → pending: its time came, or an operator ran it now. */
  | { kind: "promote"; entry: TaskIndexEntry }
  /** aggregating → pending: its group fired; `entry.batchId` names the batch. */
  | { kind: "fireGroup"; entry: TaskIndexEntry }
  /** archived/cancelled → pending with a fresh set of retries (an operator's retry). */
  | { kind: "revive"; entry: TaskIndexEntry }
  /** any unfinished state → archived (dead-lettered): retries exhausted, expired, refused, or by an operator. */
  | { kind: "archive"; entry: TaskIndexEntry; outcome: ArchiveOutcome }
  /** any unfinished state → cancelled (an operator or a concurrency strategy). */
  | { kind: "cancel"; entry: TaskIndexEntry; outcome: { finishedAtMs: number; cancelReason: string } }
  /** Remove a waiting task's row (an operator's delete). */
  | { kind: "delete"; id: string };

export interface FailureOutcome {
  lastError: string;
  lastFailedAtMs: number;
}

export interface ArchiveOutcome {
  lastError: string;
  /** Absent when no attempt failed (an operator archived a waiting task). */
  lastFailedAtMs?: number;
  finishedAtMs: number;
}

/** The transitions that end a task (it leaves the core's memory). */
export type FinishTransition = Extract<TaskTransition, { kind: "complete" | "archive" | "cancel" }>;

/** Queue settings, each written only through the grain (one writer per setting). */
export type QueueSettingEffect =
  /** The queue's paused flag (`atMs` creates the queue's row if it has none). */
  | { kind: "setPaused"; paused: boolean; atMs: number }
  /** The per-key concurrency limit; undefined clears it. */
  | { kind: "setKeyLimit"; limit: number | undefined; atMs: number }
  /** The rate-limit override; undefined goes back to the server default. */
  | { kind: "setRateLimit"; spec: RateLimitSpec | undefined; atMs: number }
  /** A group override (group "" = the queue default). */
  | { kind: "setGroupConfig"; group: string; config: GroupConfig; atMs: number }
  | { kind: "deleteGroupConfig"; group: string }
  /** A rule key's dynamic limit (its newest task's value); undefined forgets it. */
  | { kind: "setSlotLimit"; slot: string; limit: number | undefined }
  /** Forget every dynamic limit of this queue's own rule keys (the queue is being removed). */
  | { kind: "clearSlotLimits" }
  /** Remove the queue's row (its settings); the queue then exists only if a task names it. */
  | { kind: "deleteQueue" };

/** A queue's schedules (schedules.ts), each written only through the grain. */
export type ScheduleEffect =
  /** Creates or replaces a schedule's whole row (spec, paused, cursor, last task). */
  | { kind: "setSchedule"; schedule: ScheduleState }
  | { kind: "deleteSchedule"; name: string }
  /** A tick was handled (or a run-now enqueued): the cursor and the last task, in the tick's turn. */
  | { kind: "tickSchedule"; name: string; lastTickAtMs: number; lastTaskId: string };

/** Lifecycle events for logs and metrics (the core does not log). */
export type CoreEvent =
  | { kind: "dispatched"; count: number }
  | { kind: "settled"; outcome: "completed" | "archived" | "cancelled"; count: number }
  | { kind: "lease_expired"; leaseId: string; taskIds: string[] }
  /** An attempt reached its timeout or deadline: its lease was revoked, its tasks failed. */
  | { kind: "attempt_timed_out"; leaseId: string; taskIds: string[] }
  | { kind: "throttled" }
  | { kind: "rate_limited" }
  | { kind: "group_fired"; size: number }
  | { kind: "cancelled"; reason: "CONCURRENCY_LIMIT"; strategy: string }
  /** A schedule's tick was handled: enqueued, or skipped (missed, previous task running, refused by admission). */
  | { kind: "schedule_tick"; outcome: "enqueued" | "missed" | "running" | "refused" };
