/**
 * Dispatch ranks: the `seq` that places a waiting task in the ready order.
 *
 * Why a part of its own: the rank is the one place where fairness is decided, and it
 * has state of its own that must move in step. Without a GROUP_ROUND_ROBIN rule a task
 * takes the next sequence number (FIFO within a priority). Under such a rule, keys take
 * turns: a key's n-th waiting task ranks n turns after the round being served, so a key
 * with a deep backlog cannot starve a key with one task waiting (start-time fair
 * queuing over keys). The round being served moves only when a round-robin task is
 * dispatched (`served`); the rank a key gave last is forgotten when the key has no
 * unfinished task left (`forgetKey`).
 *
 * Invariant: every rank handed out is above the round being served and above the key's
 * previous rank, and plain sequence numbers only grow.
 */
import { slotOf } from "./key-slots.js";
import type { TaskIndexEntry } from "./task.js";

const roundRobinRule = (e: TaskIndexEntry) => e.rules.find((r) => r.strategy === "GROUP_ROUND_ROBIN");

export class DispatchRanks {
  private nextSeq = 1;
  /** The last rank given per round-robin slot. */
  private readonly lastRank = new Map<string, number>();
  /** The rank being served (the highest round-robin rank dispatched). */
  private servicePoint = 0;

  /** The next plain sequence number (FIFO order; aggregating members' arrival order). */
  nextSequence(): number {
    return this.nextSeq++;
  }

  /** The rank of `e` as it becomes pending now. */
  rankOf(e: TaskIndexEntry): number {
    const seq = this.nextSeq++;
    const grr = roundRobinRule(e);
    if (!grr) return seq;
    const slot = slotOf(grr.ruleId, grr.key);
    const rank = Math.max((this.lastRank.get(slot) ?? 0) + 1, this.servicePoint + 1);
    this.lastRank.set(slot, rank);
    return rank;
  }

  /** A stored entry was loaded: later sequence numbers come after its. */
  observeLoaded(e: TaskIndexEntry): void {
    this.nextSeq = Math.max(this.nextSeq, e.seq + 1);
  }

  /** A pending task already ranked under a round-robin `slot` (loaded or arriving). */
  noteRanked(slot: string, seq: number): void {
    this.lastRank.set(slot, Math.max(this.lastRank.get(slot) ?? 0, seq));
  }

  /** After loading: new keys join the round of the oldest waiting round-robin task. */
  startServingAt(oldestWaitingSeq: number | undefined): void {
    this.servicePoint = oldestWaitingSeq === undefined ? 0 : oldestWaitingSeq - 1;
  }

  /** `e` was dispatched: a round-robin rank marks the round being served (FIFO seqs do not). */
  served(e: TaskIndexEntry): void {
    if (roundRobinRule(e)) this.servicePoint = Math.max(this.servicePoint, e.seq);
  }

  /** No unfinished task has this slot's key any more. */
  forgetKey(slot: string): void {
    this.lastRank.delete(slot);
  }
}
