/**
 * The node's ledger of shared (named) concurrency rules: one in-flight count and one
 * dynamic limit per (rule, key) for every queue on the node, so tasks of different
 * types and queues that name the same rule draw on one budget.
 *
 * A queue that holds tasks back on a shared slot watches it; when any queue frees that
 * slot (or its limit changes), the watchers are woken after the current turn, so a
 * held task in another queue dispatches without waiting for a sweep.
 *
 * In a cluster (`grants` given) a shared slot with a limit admits up to this node's grant
 * from the rule's ledger (grains/ledger): the in-flight count stays local, the limit a
 * queue sets is declared to the ledger, and a grant that rises wakes every queue watching
 * the slot. A single node gives no `grants`: its limit is the whole budget, as before.
 */
import type { NodeGrants } from "../ledger/node-grants.js";
import { LocalSlotLedger, type SlotLedger } from "../queue/key-slots.js";

/** A cluster member's grants, and the hooks they need. */
export interface SharedGrants {
  grants: NodeGrants;
  nowMs: () => number;
  /** A queue started holding tasks on a shared slot: ask the ledger soon. */
  onWaiting: (slot: string) => void;
}

export class SharedSlotLedger {
  private readonly ledger = new LocalSlotLedger();
  private readonly watchers = new Map<string, Set<string>>();
  private readonly pending = new Map<string, Set<string>>();
  private flushScheduled = false;

  /**
   * @param wake called once per (queue, slot) after the turn that freed the slot; the
   * node links it after its router exists (`link`), tests may give it here.
   */
  constructor(private wake: (queue: string, slot: string) => void = () => {}, private readonly shared?: SharedGrants) {}

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
        this.shared?.grants.declare(slot, limit, this.shared.nowMs());
        this.notify(slot, queue);
      },
      ...(this.shared ? { admissionLimitOf: (slot: string) => this.shared!.grants.admissionLimitOf(slot) } : {}),
      watch: (slot) => {
        let set = this.watchers.get(slot);
        if (!set) this.watchers.set(slot, (set = new Set()));
        set.add(queue);
        this.shared?.onWaiting(slot);
      },
    };
  }

  /** Does some queue hold tasks back on `slot` (waiting for room)? */
  isWaitedOn(slot: string): boolean {
    return (this.watchers.get(slot)?.size ?? 0) > 0;
  }

  /** Shared slots this node has anything of: tasks running, tasks waiting, or a limit set. */
  slots(): Set<string> {
    const out = new Set<string>(this.watchers.keys());
    for (const [slot] of this.ledger.entries()) out.add(slot);
    return out;
  }

  /** Room was granted on `slot`: wake every queue watching it. */
  granted(slot: string): void {
    this.notify(slot, "");
  }

  inflightOf(slot: string): number {
    return this.ledger.inflightOf(slot);
  }

  /** Restores the stored dynamic limits of shared keys (at node start). */
  restoreLimits(limits: ReadonlyMap<string, number>): void {
    // Stored limits are older than any a task sets from now on (time 0 loses to them).
    for (const [slot, limit] of limits) {
      this.ledger.setLimit(slot, limit);
      this.shared?.grants.declare(slot, limit, 0);
    }
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
