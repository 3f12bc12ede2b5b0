/**
 * Which slots each unfinished task counts against, and what its rules' strategies do
 * when it arrives. A task's slots are its queue key (the per-key limit) and one per rule
 * of its chain; `KeySlots` counts them, this part decides which ones a task touches.
 *
 * Why a part of its own: joining, leaving, acquiring and releasing must name the same
 * slots for the same task, or a slot leaks (a key that never runs again) or goes
 * negative. Keeping `slotsOf` and every use of it here is what makes that hold.
 *
 * Invariant: a rule key's members are exactly the unfinished tasks under it; when the
 * last one leaves, the key's dynamic limit and round-robin rank are dropped (shared keys
 * keep their limits: other queues may still have tasks under them).
 */
import type { CoreMemory } from "./core-memory.js";
import { KeySlots, QUEUE_RULE, isSharedSlot, slotOf, type ReadyItem } from "./key-slots.js";
import { cancelledAtArrival } from "./rules.js";
import type { TaskIndexEntry } from "./task.js";

export class RuleMembership {
  readonly slots: KeySlots;
  /** Unfinished tasks under each strategy rule's slot, in arrival order. */
  private readonly members = new Map<string, Set<string>>();

  constructor(private readonly memory: CoreMemory) {
    this.slots = new KeySlots((item) => memory.isLiveReady(item), memory.deps.sharedSlots);
  }

  slotsOf(e: TaskIndexEntry): string[] {
    const slots = e.concurrencyKey ? [slotOf(QUEUE_RULE, e.concurrencyKey)] : [];
    for (const r of e.rules) slots.push(slotOf(r.ruleId, r.key));
    return slots;
  }

  acquire(e: TaskIndexEntry): void {
    for (const slot of this.slotsOf(e)) this.slots.acquire(slot);
  }

  release(e: TaskIndexEntry): void {
    for (const slot of this.slotsOf(e)) this.requeue(this.slots.release(slot));
  }

  /** The first slot, in chain order, that has no room for `e`. */
  saturatedSlot(e: TaskIndexEntry): string | undefined {
    return this.slotsOf(e).find((slot) => this.slots.isSaturated(slot));
  }

  /** Parks a task at its saturated slot until the slot frees. */
  hold(e: TaskIndexEntry, saturated: string, item: ReadyItem): void {
    this.slots.hold(saturated, item);
    // It may have been woken for a free slot under another rule of its chain: give
    // that slot to the next task held there, or it would sit free (a stall).
    for (const slot of this.slotsOf(e)) if (slot !== saturated) this.wakeSlot(slot);
  }

  /**
   * Holds a packed task (whose only slot is its queue key: it has no rules) at `key` if
   * that slot is saturated, as `saturatedSlot` and `hold` would; false when it has room.
   */
  holdAtKey(key: string, item: ReadyItem): boolean {
    const slot = slotOf(QUEUE_RULE, key);
    if (!this.slots.isSaturated(slot)) return false;
    this.slots.hold(slot, item);
    return true;
  }

  /**
   * A waiting task of these slots left memory. It may have been a held task that was
   * moved back to the ready heap for a freed slot, so give that slot to the next one.
   */
  wakeSlotsOf(e: TaskIndexEntry): void {
    for (const slot of this.slotsOf(e)) this.wakeSlot(slot);
  }

  /** A slot may have room now (here, or a shared slot freed elsewhere on the node). */
  wakeSlot(slot: string): void {
    this.requeue(this.slots.wake(slot));
  }

  /** Changes the queue's per-key limit live; lowering it keeps running tasks. */
  setKeyLimit(limit: number | undefined): void {
    this.requeue(this.slots.setRuleLimit(QUEUE_RULE, limit));
  }

  join(e: TaskIndexEntry): void {
    for (const r of e.rules) {
      const slot = slotOf(r.ruleId, r.key);
      let members = this.members.get(slot);
      if (!members) this.members.set(slot, (members = new Set()));
      members.add(e.id);
      if (e.state === "pending" && r.strategy === "GROUP_ROUND_ROBIN") this.memory.ranks.noteRanked(slot, e.seq);
    }
  }

  leave(e: TaskIndexEntry): void {
    for (const r of e.rules) {
      const slot = slotOf(r.ruleId, r.key);
      const members = this.members.get(slot);
      members?.delete(e.id);
      if (members?.size === 0) {
        this.members.delete(slot);
        this.memory.ranks.forgetKey(slot);
        // No unfinished task has this key: its next task sets the limit afresh. (Shared
        // keys may have tasks in other queues; their limits stay.)
        if (!isSharedSlot(slot)) {
          this.slots.setSlotLimit(slot, undefined);
          this.memory.persist({ kind: "setSlotLimit", slot, limit: undefined });
        }
      }
    }
  }

  /**
   * What each rule's strategy does when `e` arrives (every rule of the chain applies;
   * a rule that cancels `e` ends the chain). The key's limit becomes the one computed
   * for `e`, its newest task. `cancel` ends a task the strategy pushed out.
   */
  applyStrategies(e: TaskIndexEntry, cancel: (doomed: TaskIndexEntry) => void): void {
    const { entries } = this.memory;
    for (const r of e.rules) {
      if (!entries.has(e.id)) return;
      const slot = slotOf(r.ruleId, r.key);
      if (this.slots.limitOf(slot) !== r.maxRuns) {
        this.requeue(this.slots.setSlotLimit(slot, r.maxRuns));
        this.memory.persist({ kind: "setSlotLimit", slot, limit: r.maxRuns });
      }
      if (r.strategy === "GROUP_ROUND_ROBIN") continue; // waits its turn; nothing to decide at arrival
      const members = [...(this.members.get(slot) ?? [])].map((id) => entries.get(id)!).filter((m) => m.id !== e.id);
      const running = members.filter((m) => m.state === "active");
      const queued = members.filter((m) => m.state === "pending");
      for (const doomed of cancelledAtArrival(r.strategy, r.maxRuns, e, running, queued)) {
        if (!entries.has(doomed.id)) continue;
        cancel(doomed);
        this.memory.report({ kind: "cancelled", reason: "CONCURRENCY_LIMIT", strategy: r.strategy });
      }
    }
  }

  /**
   * Gives back this grain's share of node-wide (shared-rule) slots before its memory is
   * dropped: the next activation counts its running tasks again.
   */
  releaseShared(): void {
    // Running tasks are never packed.
    for (const e of this.memory.entries.objects()) {
      if (e.state !== "active") continue;
      for (const slot of this.slotsOf(e)) if (isSharedSlot(slot)) this.slots.release(slot);
    }
  }

  private requeue(freed: readonly ReadyItem[]): void {
    for (const item of freed) this.memory.pushReady(item);
  }
}
