/**
 * The instant each aggregating group fires by time (max delay or grace), in one heap, so
 * the grain arms a single timer at the earliest (`nextAtMs`, one of the candidates of
 * `QueueCore.nextWakeAtMs`), the way `DueTimers` does for tasks.
 *
 * Why a part of its own: a group's deadline moves (grace restarts with every member, a
 * config change moves both thresholds), and a heap cannot move an item. Each group's
 * current deadline is kept in a map; a moved deadline pushes a new item and leaves the
 * old one behind, which is stale once it no longer matches the map, and skipped.
 *
 * Invariant: every group with a current deadline has exactly one live item in the heap;
 * stale heads are dropped before `nextAtMs` answers, so the grain never wakes for a
 * deadline that moved. Stale items under a live head are dropped in bulk when they pile
 * up (`Heap.compactIfStale`).
 */
import { Heap } from "./heap.js";

interface DeadlineItem {
  atMs: number;
  group: string;
}

export class GroupDeadlines {
  private readonly heap = new Heap<DeadlineItem>((a, b) => a.atMs < b.atMs);
  private readonly current = new Map<string, number>();

  /** Sets `group`'s deadline to `atMs` (a moved deadline leaves its old item stale). */
  arm(group: string, atMs: number): void {
    if (this.current.get(group) === atMs) return;
    this.current.set(group, atMs);
    this.heap.push({ atMs, group });
    this.heap.compactIfStale(this.current.size, (d) => this.isLive(d));
  }

  /** The group no longer waits on time (it fired whole or lost its last member). */
  disarm(group: string): void {
    this.current.delete(group);
  }

  /** The earliest live deadline; drops stale heads on the way (not a pure query). */
  nextAtMs(): number | undefined {
    this.dropStaleHeads();
    return this.heap.peek()?.atMs;
  }

  /** Takes the group whose deadline is earliest if it is due at `nowMs`; it is disarmed. */
  popDue(nowMs: number): string | undefined {
    this.dropStaleHeads();
    const top = this.heap.peek();
    if (!top || top.atMs > nowMs) return undefined;
    this.heap.pop();
    this.current.delete(top.group);
    return top.group;
  }

  private dropStaleHeads(): void {
    for (let top = this.heap.peek(); top && !this.isLive(top); top = this.heap.peek()) this.heap.pop();
  }

  private isLive(d: DeadlineItem): boolean {
    return this.current.get(d.group) === d.atMs;
  }
}
