/**
 * What an operator may do to one unfinished task (cancel, run now, archive, delete), and
 * bringing a finished one back (revive).
 *
 * Why a part of its own: each action checks the task's state before it acts and answers
 * with the error the operator sees; the acting itself goes through the same exits and
 * waiting places a worker's outcome uses (`TaskExits`, `WaitingTasks`), so an operator
 * cannot leave a task half-removed.
 *
 * Invariant: an action either changes nothing and returns its error, or changes the task
 * and appends the effect that persists it.
 */
import { ConveyorError } from "../../base/errors.js";
import { quote } from "../../base/limits.js";
import type { CoreMemory } from "./core-memory.js";
import { WAITING } from "./due-timers.js";
import type { RuleMembership } from "./rule-membership.js";
import type { TaskExits } from "./task-exits.js";
import { indexEntry, type CancelReason, type TaskRecord, type TaskState } from "./task.js";
import type { UniqueKeys } from "./unique-keys.js";
import type { WaitingTasks } from "./waiting-tasks.js";

export class OperatorActions {
  constructor(
    private readonly memory: CoreMemory,
    private readonly rules: RuleMembership,
    private readonly unique: UniqueKeys,
    private readonly waiting: WaitingTasks,
    private readonly exits: TaskExits,
  ) {}

  /** Cancels an unfinished task in memory; a running one loses its lease at once. */
  cancel(id: string, reason: CancelReason, nowMs: number): ConveyorError | null {
    const e = this.memory.entries.get(id);
    if (!e) return notInMemory(id);
    this.exits.cancel(e, reason, nowMs);
    return null;
  }

  /** Makes a scheduled or retry task pending now. */
  runNow(id: string): ConveyorError | null {
    const e = this.memory.entries.get(id);
    if (!e) return notInMemory(id);
    if (e.state !== "scheduled" && e.state !== "retry") return wrongState(id, e.state, "run", "scheduled or retry");
    this.waiting.promote(e);
    return null;
  }

  /** Dead-letters a waiting task. */
  archive(id: string, nowMs: number): ConveyorError | null {
    const e = this.memory.entries.get(id);
    if (!e) return notInMemory(id);
    if (!WAITING.has(e.state)) return wrongState(id, e.state, "archive", "pending, scheduled or retry");
    this.exits.finish(e, { kind: "archive", outcome: { lastError: "archived by an operator", finishedAtMs: nowMs } });
    return null;
  }

  /** Deletes a waiting task (finished tasks are deleted by the shell, not the core). */
  delete(id: string): ConveyorError | null {
    const e = this.memory.entries.get(id);
    if (!e) return notInMemory(id);
    if (e.state === "active") return wrongState(id, e.state, "delete", "not running (cancel it first)");
    this.exits.forget(e);
    this.memory.persist({ kind: "delete", id });
    return null;
  }

  /** Deletes a finished task's row: it is not in memory, so only the effect is needed. */
  deleteFinished(id: string): void {
    this.memory.persist({ kind: "delete", id });
  }

  /** Brings an archived or cancelled task back to pending with a fresh set of retries. */
  revive(record: TaskRecord, nowMs: number): ConveyorError | null {
    if (record.state !== "archived" && record.state !== "cancelled") {
      return wrongState(record.id, record.state, "retry", "archived or cancelled");
    }
    if (record.uniqueKey && this.unique.holderOf(record.uniqueKey, nowMs)) {
      return new ConveyorError("ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT",
        `unique_key ${quote(record.uniqueKey)} is held by another unfinished task`, "id");
    }
    const e = indexEntry(record, {
      state: "pending", seq: 0, readyAtMs: nowMs, expiresAtMs: 0, uniqueUntilMs: record.uniqueUntilMs,
      // A group member comes back on its own, as a batch of one.
      batchId: record.group ? record.id : "", payloadBytes: record.payload.byteLength,
      // The attempt history numbers on.
      attemptNumber: record.attemptNumber,
    });
    this.memory.entries.set(e);
    if (e.uniqueKey) this.unique.hold(e.uniqueKey, e.id, e.uniqueUntilMs);
    this.rules.join(e);
    this.waiting.makePending(e, this.memory.ranks.rankOf(e));
    this.waiting.armExpiry(e);
    this.memory.persist({ kind: "revive", entry: { ...e } });
    return null;
  }
}

/** The core only holds unfinished tasks; the shell resolves what this means. */
function notInMemory(id: string): ConveyorError {
  return new ConveyorError("NOT_FOUND", "TASK_NOT_FOUND", `task ${quote(id)} is not unfinished in this queue`);
}

function wrongState(id: string, state: TaskState, action: string, wanted: string): ConveyorError {
  return new ConveyorError("FAILED_PRECONDITION", "TASK_STATE_CONFLICT",
    `cannot ${action} task ${quote(id)}: it is ${state}, the action needs it ${wanted}`);
}
