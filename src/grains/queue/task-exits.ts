/**
 * How a task leaves a state it cannot stay in: its lease (settled, timed out, lapsed,
 * cancelled), a failed attempt (retry or archive), and memory itself (finished, or
 * deleted by an operator).
 *
 * Why a part of its own: a task is in several indexes at once (its group or batch, its
 * rule keys, its slots, its unique key, its lease). Every exit goes through `forget` and
 * `detachFromLease` here, so no path can leave a trace behind in one of them — `finish`
 * and an operator's delete share the same unlink sequence.
 *
 * Invariant: after `forget`, no part of the core names the task except lazily-cleaned
 * timers and heap items; after `detachFromLease`, the task holds no slot and no lease.
 */
import { ATTEMPT_ERROR_MAX_BYTES, ATTEMPT_STACK_MAX_BYTES, truncateText } from "../../base/limits.js";
import type { AttemptEnding } from "./attempts.js";
import { retryDelayMs } from "./backoff.js";
import type { CoreMemory } from "./core-memory.js";
import type { FinishTransition } from "./effects.js";
import type { FiredGroups } from "./fired-groups.js";
import type { Lease } from "./lease-table.js";
import type { RuleMembership } from "./rule-membership.js";
import type { CancelReason, TaskIndexEntry } from "./task.js";
import type { UniqueKeys } from "./unique-keys.js";
import type { WaitingTasks } from "./waiting-tasks.js";

/** How a task ends: a finishing transition, before the entry is attached. */
export type Ending = FinishTransition extends infer T ? (T extends unknown ? Omit<T, "entry"> : never) : never;
const FINAL_STATE = { complete: "completed", archive: "archived", cancel: "cancelled" } as const;

export class TaskExits {
  constructor(
    private readonly memory: CoreMemory,
    private readonly groups: FiredGroups,
    private readonly rules: RuleMembership,
    private readonly unique: UniqueKeys,
    private readonly waiting: WaitingTasks,
  ) {}

  /**
   * The one unlink path: takes an unfinished task out of memory (its group or batch, its
   * rules, the index, its unique key) and, if it was waiting, hands a slot it may have
   * been promised to the next held task. An active task has already left its lease.
   */
  forget(e: TaskIndexEntry): void {
    const waiting = e.state !== "active";
    this.groups.unlink(e);
    this.rules.leave(e);
    this.memory.entries.delete(e.id);
    if (e.uniqueKey) this.unique.release(e.uniqueKey, e.id);
    if (waiting) this.rules.wakeSlotsOf(e);
  }

  /** Moves a task to a finished state and out of memory. */
  finish(e: TaskIndexEntry, end: Ending): void {
    const state = FINAL_STATE[end.kind];
    this.forget(e);
    e.state = state;
    e.leaseId = "";
    e.leaseExpiresAtMs = 0;
    e.attemptEndsAtMs = 0;
    e.attemptStartedAtMs = 0;
    e.attemptWorker = "";
    this.memory.persist({ ...end, entry: { ...e } } as FinishTransition);
    this.memory.report({ kind: "settled", outcome: state, count: 1 });
  }

  /** Archives a task with `lastError`, failed and finished at `nowMs`. */
  archive(e: TaskIndexEntry, lastError: string, nowMs: number): void {
    this.finish(e, { kind: "archive", outcome: { lastError, lastFailedAtMs: nowMs, finishedAtMs: nowMs } });
  }

  /** Cancels an unfinished task; a running one loses its lease at once. */
  cancel(e: TaskIndexEntry, reason: CancelReason, nowMs: number): void {
    const { leases } = this.memory;
    if (e.state === "active") {
      const lease = leases.get(e.leaseId);
      if (lease) {
        this.detachFromLease(lease, e, { outcome: "cancelled", error: "" }, nowMs);
        if (!leases.has(lease.id)) leases.revoke(lease.id, reason, nowMs + this.memory.config.leaseTtlMs);
      }
    }
    this.finish(e, { kind: "cancel", outcome: { finishedAtMs: nowMs, cancelReason: reason } });
  }

  /**
   * Removes an active task from its lease and frees its key slots: its attempt is over,
   * and is recorded in its history (`recordAttempt`, in this turn).
   */
  detachFromLease(lease: Lease, e: TaskIndexEntry, ending: AttemptEnding, nowMs: number): void {
    this.memory.persist({
      kind: "recordAttempt", taskId: e.id, number: e.attemptNumber, startedAtMs: e.attemptStartedAtMs, endedAtMs: nowMs, workerId: e.attemptWorker,
      leaseId: e.leaseId, outcome: ending.outcome, error: truncateText(ending.error, ATTEMPT_ERROR_MAX_BYTES),
      ...(ending.stack ? { stack: truncateText(ending.stack, ATTEMPT_STACK_MAX_BYTES) } : {}),
    });
    this.memory.leases.detach(lease, e.id);
    e.leaseId = "";
    e.leaseExpiresAtMs = 0;
    e.attemptEndsAtMs = 0;
    e.attemptStartedAtMs = 0;
    e.attemptWorker = "";
    this.rules.release(e);
  }

  /**
   * A failed attempt. With retries left: "backoff" waits in `retry`, "immediate" (a
   * lapsed lease) returns to pending at its old place. Without: archived.
   */
  failAttempt(e: TaskIndexEntry, error: string, nowMs: number, mode: "backoff" | "immediate"): void {
    if (e.deadlineAtMs > 0 && e.deadlineAtMs <= nowMs) {
      this.archive(e, `${error} (deadline exceeded: not retried)`, nowMs);
      return;
    }
    if (e.retried >= e.maxRetry) {
      this.archive(e, error, nowMs);
      return;
    }
    e.retried += 1;
    if (mode === "immediate") this.waiting.makePending(e, e.seq);
    else this.waiting.retryAt(e, nowMs + retryDelayMs(e.retried, e.backoffBaseMs, e.backoffMaxMs, this.memory.deps.random));
    this.waiting.armExpiry(e);
    this.memory.persist({ kind: mode === "immediate" ? "requeue" : "retry", entry: { ...e }, outcome: { lastError: error, lastFailedAtMs: nowMs } });
  }

  /** Archives a waiting task whose expiry or deadline has passed (`isOverdue`); true if it did. */
  expireIfOverdue(e: TaskIndexEntry, nowMs: number): boolean {
    if (e.expiresAtMs > 0 && e.expiresAtMs <= nowMs) {
      this.archive(e, "expired before dispatch", nowMs);
      return true;
    }
    if (e.deadlineAtMs > 0 && e.deadlineAtMs <= nowMs) {
      this.archive(e, "deadline exceeded before dispatch", nowMs);
      return true;
    }
    return false;
  }
}

/** Whether a waiting task's expiry or deadline has passed at `nowMs` (what `expireIfOverdue` acts on). */
export function isOverdue(e: Pick<TaskIndexEntry, "expiresAtMs" | "deadlineAtMs">, nowMs: number): boolean {
  return (e.expiresAtMs > 0 && e.expiresAtMs <= nowMs) || (e.deadlineAtMs > 0 && e.deadlineAtMs <= nowMs);
}
