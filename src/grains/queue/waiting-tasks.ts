/**
 * Where a waiting task sits: an aggregating one in its group, a pending one in the
 * dispatch order (alone, or in its fired batch), a scheduled or retry one under a due
 * timer; every waiting task also under its expiry and deadline timers.
 *
 * Why a part of its own: arrival, load, retry, release, promotion and revival all put a
 * task back to waiting, and each must put it in the same places, or a task waits
 * forever (no timer, not in `ready`) or is dispatched twice.
 *
 * Invariant: a pending entry is in the dispatch order at its (priority, seq), and the
 * shell learns that something may have become dispatchable (`markReadyChanged`).
 *
 * A plain pending task is packed as it enters the dispatch order (CoreMemory.waitPacked):
 * after `schedule`, `makePending` or `promote`, the caller's `e` may be a detached copy,
 * good for reading (an effect's entry, its expiry timers) but never for changing.
 */
import type { CoreMemory } from "./core-memory.js";
import type { FiredGroups } from "./fired-groups.js";
import type { TaskIndexEntry } from "./task.js";

export class WaitingTasks {
  constructor(
    private readonly memory: CoreMemory,
    private readonly groups: FiredGroups,
  ) {}

  /** Puts a waiting entry where it belongs: its group, the dispatch order or the due timers. */
  schedule(e: TaskIndexEntry, nowMs: number): void {
    if (e.state === "aggregating") {
      this.groups.aggregate(e);
    } else if (e.state === "pending") {
      this.enqueueReady(e);
    } else if (e.state === "scheduled" || e.state === "retry") {
      this.memory.due.push(e.readyAtMs, e.id, "ready");
    }
    this.armExpiry(e);
  }

  /** Makes `e` pending at rank `seq` (its old place, or a fresh rank). */
  makePending(e: TaskIndexEntry, seq: number): void {
    e.state = "pending";
    e.seq = seq;
    this.enqueueReady(e);
  }

  /** A scheduled or retry task becomes pending now, at a fresh rank (its timer fired, or run now). */
  promote(e: TaskIndexEntry): void {
    this.makePending(e, this.memory.ranks.rankOf(e));
    this.memory.persist({ kind: "promote", entry: { ...e } });
  }

  /** Waits in `retry` until `readyAtMs`. */
  retryAt(e: TaskIndexEntry, readyAtMs: number): void {
    e.state = "retry";
    e.readyAtMs = readyAtMs;
    this.memory.due.push(e.readyAtMs, e.id, "ready");
  }

  /** Arms the pre-dispatch expiry and deadline timers of a waiting task. */
  armExpiry(e: TaskIndexEntry): void {
    this.memory.due.armExpiry(e);
  }

  /** Puts a pending entry in the dispatch order: alone (packed when it can be), or in its batch. */
  private enqueueReady(e: TaskIndexEntry): void {
    this.memory.markReadyChanged();
    if (e.batchId !== "") this.groups.addToBatch(e);
    else if (!this.memory.waitPacked(e)) this.memory.ready.pushTask({ id: e.id, priority: e.priority, seq: e.seq });
  }
}
