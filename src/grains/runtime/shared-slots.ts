/**
 * The node's ledger of shared (named) concurrency rules: one in-flight count and one
 * dynamic limit per (rule, key) for every queue on the node, so tasks of different
 * types and queues that name the same rule draw on one budget.
 *
 * A queue that holds tasks back on a shared slot watches it; when any queue frees that
 * slot (or its limit changes), the watchers are woken after the current turn, so a
 * held task in another queue dispatches without waiting for a sweep.
 *
 * Clustering will place this ledger in a grain of its own on the ring (keyed by rule
 * name), so that queues on different nodes share it; the `SlotLedger` port stays.
 */
import { LocalSlotLedger, type SlotLedger } from "../queue/key-slots.js";

export class SharedSlotLedger {
  private readonly ledger = new LocalSlotLedger();
  private readonly watchers = new Map<string, Set<string>>();
  private readonly pending = new Map<string, Set<string>>();
  private flushScheduled = false;

  /**
   * @param wake called once per (queue, slot) after the turn that freed the slot; the
   * node links it after its router exists (`link`), tests may give it here.
   */
  constructor(private wake: (queue: string, slot: string) => void = () => {}) {}

  /** Sets where wakes go (the node: the watching queue's ref, through the router). */
  link(wake: (queue: string, slot: string) => void): void {
    this.wake = wake;
  }

  /** The ledger as seen by one queue's grain. */
  forQueue(queue: string): SlotLedger & { watch(slot: string): void } {
    return {
      inflightOf: (slot) => this.ledger.inflightOf(slot),
      adjust: (slot, delta) => {
        this.ledger.adjust(slot, delta);
        if (delta < 0) this.notify(slot, queue);
      },
      limitOf: (slot) => this.ledger.limitOf(slot),
      setLimit: (slot, limit) => {
        this.ledger.setLimit(slot, limit);
        this.notify(slot, queue);
      },
      watch: (slot) => {
        let set = this.watchers.get(slot);
        if (!set) this.watchers.set(slot, (set = new Set()));
        set.add(queue);
      },
    };
  }

  inflightOf(slot: string): number {
    return this.ledger.inflightOf(slot);
  }

  /** Restores the stored dynamic limits of shared keys (at node start). */
  restoreLimits(limits: ReadonlyMap<string, number>): void {
    for (const [slot, limit] of limits) this.ledger.setLimit(slot, limit);
  }

  /** Wakes the other queues watching `slot` (the caller wakes its own held tasks). */
  private notify(slot: string, from: string): void {
    const watchers = this.watchers.get(slot);
    if (!watchers) return;
    for (const queue of watchers) {
      if (queue === from) continue;
      let slots = this.pending.get(queue);
      if (!slots) this.pending.set(queue, (slots = new Set()));
      slots.add(slot);
    }
    this.watchers.delete(slot);
    if (watchers.has(from)) this.watchers.set(slot, new Set([from]));
    if (this.pending.size > 0 && !this.flushScheduled) {
      this.flushScheduled = true;
      queueMicrotask(() => this.flush());
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    const pending = [...this.pending];
    this.pending.clear();
    for (const [queue, slots] of pending) for (const slot of slots) this.wake(queue, slot);
  }
}
