/**
 * Due timers: every instant at which a waiting task changes by itself (a scheduled or
 * retry task becomes pending; a waiting task expires or passes its deadline).
 *
 * Why a part of its own: one heap for all of a queue's timed work is what lets the grain
 * arm a single timer (`nextAtMs`), and its memory has to be kept in check on its own
 * terms. Timers are deleted lazily: a task that moves on (dispatched, finished,
 * re-timed) leaves its timer behind, and the timer is ignored when it fires.
 *
 * Invariant: memory follows the unfinished tasks, not every task ever enqueued. When
 * stale timers pile up (`Heap.compactIfStale` holds the thresholds), `compact` drops
 * every timer that no longer matches its task, in one pass. Timers due at the same
 * instant fire in the order they were armed (FIFO promotion).
 */
import { Heap } from "./heap.js";
import type { TaskIndexEntry, TaskState } from "./task.js";

export type DueKind = "ready" | "expire" | "deadline";

export interface DueItem {
  atMs: number;
  /** Arming order: tasks due at the same instant are promoted FIFO. */
  order: number;
  id: string;
  kind: DueKind;
}

/** States in which a task waits (not running, not finished). */
export const WAITING: ReadonlySet<TaskState> = new Set(["pending", "scheduled", "retry", "aggregating"]);

/** True when timer `d` still means something for its task `e` (what compaction keeps). */
export function isCurrentTimer(d: DueItem, e: TaskIndexEntry): boolean {
  if (d.kind === "ready") return (e.state === "scheduled" || e.state === "retry") && e.readyAtMs === d.atMs;
  return WAITING.has(e.state) && (d.kind === "expire" ? e.expiresAtMs : e.deadlineAtMs) === d.atMs;
}

export class DueTimers {
  private readonly heap = new Heap<DueItem>((a, b) => (a.atMs !== b.atMs ? a.atMs < b.atMs : a.order < b.order));
  private order = 0;

  get size(): number {
    return this.heap.size;
  }

  push(atMs: number, id: string, kind: DueKind): void {
    this.heap.push({ atMs, order: this.order++, id, kind });
  }

  /** Arms the pre-dispatch expiry and deadline timers of a waiting task. */
  armExpiry(e: TaskIndexEntry): void {
    if (e.expiresAtMs > 0) this.push(e.expiresAtMs, e.id, "expire");
    if (e.deadlineAtMs > 0) this.push(e.deadlineAtMs, e.id, "deadline");
  }

  nextAtMs(): number | undefined {
    return this.heap.peek()?.atMs;
  }

  /** Takes the earliest timer if it is due at `nowMs`. */
  popDue(nowMs: number): DueItem | undefined {
    const top = this.heap.peek();
    if (!top || top.atMs > nowMs) return undefined;
    this.heap.pop();
    return top;
  }

  /** Drops stale timers when they outnumber the `liveTasks`; `entryOf` finds a timer's task. */
  compact(liveTasks: number, entryOf: (id: string) => TaskIndexEntry | undefined): void {
    this.heap.compactIfStale(liveTasks, (d) => {
      const e = entryOf(d.id);
      return e !== undefined && isCurrentTimer(d, e);
    });
  }
}
