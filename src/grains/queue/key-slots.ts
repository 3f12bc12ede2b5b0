import { Heap } from "./heap.js";

/** A position in the dispatch order: highest priority first, then lowest seq. */
export interface ReadyItem {
  id: string;
  priority: number;
  seq: number;
}

export const readyOrder = (a: ReadyItem, b: ReadyItem): boolean =>
  a.priority !== b.priority ? a.priority > b.priority : a.seq < b.seq;

/**
 * A slot: one budget that tasks count against, `${ruleId}\0${key}`. The queue's own
 * per-key limit is the rule "q"; each concurrency rule of a task type is another rule.
 * Rule ids starting with "@" are shared (named) rules, counted node-wide (and, in a
 * cluster, admitted up to the node's grant from the rule's ledger).
 */
export const slotOf = (ruleId: string, key: string): string => `${ruleId}\u0000${key}`;
export const ruleOfSlot = (slot: string): string => slot.slice(0, slot.indexOf("\u0000"));
export const isSharedSlot = (slot: string): boolean => slot.startsWith("@");
export const QUEUE_RULE = "q";

/**
 * In-flight counts and dynamic limits of slots. Each queue has its own; shared rules use
 * one ledger per node, so every queue that declares a named rule draws on one budget.
 */
export interface SlotLedger {
  inflightOf(slot: string): number;
  adjust(slot: string, delta: 1 | -1): void;
  /** The slot's limit as set here (the newest task's value): what strategies compare with. */
  limitOf(slot: string): number | undefined;
  setLimit(slot: string, limit: number | undefined): void;
  /**
   * How many tasks of the slot may run here, when that differs from `limitOf`: in a
   * cluster, a shared slot's grant from its ledger (grant-ledger.ts). Undefined: no limit.
   */
  admissionLimitOf?(slot: string): number | undefined;
}

export class LocalSlotLedger implements SlotLedger {
  private readonly inflight = new Map<string, number>();
  private readonly limits = new Map<string, number>();

  inflightOf(slot: string): number {
    return this.inflight.get(slot) ?? 0;
  }

  adjust(slot: string, delta: 1 | -1): void {
    const n = this.inflightOf(slot) + delta;
    if (n < 0) throw new Error("a slot was released twice (no task of it in flight)");
    if (n === 0) this.inflight.delete(slot);
    else this.inflight.set(slot, n);
  }

  limitOf(slot: string): number | undefined {
    return this.limits.get(slot);
  }

  setLimit(slot: string, limit: number | undefined): void {
    if (limit === undefined) this.limits.delete(slot);
    else this.limits.set(slot, limit);
  }

  entries(): IterableIterator<[string, number]> {
    return this.inflight.entries();
  }
}

/**
 * Slot accounting of one queue: the per-key concurrency limit and the concurrency rules.
 *
 * A task whose slot is saturated steps out of the runnable order into that slot's own
 * held heap, so it blocks nobody (no head-of-line blocking). When a slot frees, exactly
 * as many held tasks step back in as there are free slots, in their original order.
 * A task needs a free slot under every slot it counts against, takes them all at
 * dispatch and holds none while it waits.
 *
 * In-flight counts are rebuilt exactly from the active tasks on activation; nothing here
 * is durable.
 */
export class KeySlots {
  private readonly local = new LocalSlotLedger();
  private readonly held = new Map<string, Heap<ReadyItem>>();
  /** Limits that apply to every key of a rule (the queue's per-key limit). */
  private readonly ruleLimits = new Map<string, number>();

  /**
   * @param isLive tells whether a held item still refers to a waiting task.
   * @param shared the node's ledger for shared rules; `watch` registers this queue's interest when a task is held on a shared slot.
   */
  constructor(
    private readonly isLive: (item: ReadyItem) => boolean,
    private readonly shared?: SlotLedger & { watch(slot: string): void },
  ) {}

  /** The queue's per-key limit (rule "q"). */
  get limit(): number | undefined {
    return this.ruleLimits.get(QUEUE_RULE);
  }

  private ledgerOf(slot: string): SlotLedger {
    return isSharedSlot(slot) && this.shared ? this.shared : this.local;
  }

  inflightOf(slot: string): number {
    return this.ledgerOf(slot).inflightOf(slot);
  }

  limitOf(slot: string): number | undefined {
    return this.ledgerOf(slot).limitOf(slot) ?? this.ruleLimits.get(ruleOfSlot(slot));
  }

  /** Keyed tasks of this queue running under the queue's per-key limit. */
  inflightTotal(): number {
    let total = 0;
    for (const [slot, n] of this.local.entries()) if (ruleOfSlot(slot) === QUEUE_RULE) total += n;
    return total;
  }

  /** Tasks held back now (entries of tasks that went away meanwhile are not counted). */
  heldTotal(): number {
    let total = 0;
    for (const heap of this.held.values()) total += heap.count(this.isLive);
    return total;
  }

  /** What admission is checked against: a shared slot's grant in a cluster, else its limit. */
  private admissionLimitOf(slot: string): number | undefined {
    const ledger = this.ledgerOf(slot);
    return ledger.admissionLimitOf ? ledger.admissionLimitOf(slot) : this.limitOf(slot);
  }

  isSaturated(slot: string): boolean {
    const limit = this.admissionLimitOf(slot);
    return limit !== undefined && this.inflightOf(slot) >= limit;
  }

  acquire(slot: string): void {
    this.ledgerOf(slot).adjust(slot, 1);
  }

  hold(slot: string, item: ReadyItem): void {
    let heap = this.held.get(slot);
    if (!heap) this.held.set(slot, (heap = new Heap(readyOrder)));
    heap.push(item);
    if (isSharedSlot(slot)) this.shared?.watch(slot);
  }

  /** Frees one slot; returns the held items that may now run. */
  release(slot: string): ReadyItem[] {
    this.ledgerOf(slot).adjust(slot, -1);
    return this.unhold(slot);
  }

  /** Held items of `slot` that fit its free slots (after a waiting task of it went away). */
  wake(slot: string): ReadyItem[] {
    return this.unhold(slot);
  }

  /** Changes a rule's limit for every key (the queue's per-key limit); returns freed items. */
  setRuleLimit(ruleId: string, limit: number | undefined): ReadyItem[] {
    if (limit === undefined) this.ruleLimits.delete(ruleId);
    else this.ruleLimits.set(ruleId, limit);
    const freed: ReadyItem[] = [];
    for (const slot of [...this.held.keys()]) if (ruleOfSlot(slot) === ruleId) freed.push(...this.unhold(slot));
    return freed;
  }

  /** Sets one slot's own limit (a dynamic limit); returns the held items that may now run. */
  setSlotLimit(slot: string, limit: number | undefined): ReadyItem[] {
    this.ledgerOf(slot).setLimit(slot, limit);
    return this.unhold(slot);
  }

  private unhold(slot: string): ReadyItem[] {
    const heap = this.held.get(slot);
    if (!heap) return [];
    const out: ReadyItem[] = [];
    const limit = this.admissionLimitOf(slot);
    const room = limit === undefined ? Infinity : limit - this.inflightOf(slot);
    while (out.length < room && heap.size > 0) {
      const item = heap.pop()!;
      if (this.isLive(item)) out.push(item);
    }
    if (heap.size === 0) this.held.delete(slot);
    // Still holding tasks on a shared slot: keep watching it (a wake clears the watch).
    else if (isSharedSlot(slot)) this.shared?.watch(slot);
    return out;
  }
}
