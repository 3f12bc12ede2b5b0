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
 * Per-key slot accounting for one queue (the per-key concurrency limit).
 *
 * A task whose key is saturated steps out of the runnable order into its key's own
 * held heap, so it blocks nobody (no head-of-line blocking). When a slot of that key
 * frees, exactly as many held tasks step back in as there are free slots, in their
 * original order, so they dispatch before later work of equal priority.
 *
 * In-flight counts are rebuilt exactly from the active tasks on activation; nothing
 * here is durable.
 */
export class KeySlots {
  private readonly inflight = new Map<string, number>();
  private readonly held = new Map<string, Heap<ReadyItem>>();
  private limitValue: number | undefined;

  /** @param isLive tells whether a held item still refers to a waiting task. */
  constructor(private readonly isLive: (item: ReadyItem) => boolean) {}

  get limit(): number | undefined {
    return this.limitValue;
  }

  inflightOf(key: string): number {
    return this.inflight.get(key) ?? 0;
  }

  /** Total tasks running under a key (keyless tasks are not counted). */
  inflightTotal(): number {
    let total = 0;
    for (const n of this.inflight.values()) total += n;
    return total;
  }

  heldTotal(): number {
    let total = 0;
    for (const heap of this.held.values()) total += heap.size;
    return total;
  }

  /** True when a task of `key` may not start now. Keyless tasks are never gated. */
  isSaturated(key: string): boolean {
    return key !== "" && this.limitValue !== undefined && this.inflightOf(key) >= this.limitValue;
  }

  acquire(key: string): void {
    if (key !== "") this.inflight.set(key, this.inflightOf(key) + 1);
  }

  hold(key: string, item: ReadyItem): void {
    let heap = this.held.get(key);
    if (!heap) this.held.set(key, (heap = new Heap(readyOrder)));
    heap.push(item);
  }

  /** Frees one slot of `key`; returns the held items that may now run. */
  release(key: string): ReadyItem[] {
    if (key === "") return [];
    const n = this.inflightOf(key) - 1;
    if (n < 0) throw new Error(`key slot released twice for a key with no task in flight`);
    if (n === 0) this.inflight.delete(key);
    else this.inflight.set(key, n);
    return this.unhold(key);
  }

  /** Held items of `key` that fit its free slots (after a waiting task of it went away). */
  wake(key: string): ReadyItem[] {
    return key === "" ? [] : this.unhold(key);
  }

  /** Changes the limit live; returns the held items that may now run. */
  setLimit(limit: number | undefined): ReadyItem[] {
    this.limitValue = limit;
    const freed: ReadyItem[] = [];
    for (const key of [...this.held.keys()]) freed.push(...this.unhold(key));
    return freed;
  }

  private unhold(key: string): ReadyItem[] {
    const heap = this.held.get(key);
    if (!heap) return [];
    const out: ReadyItem[] = [];
    const room = this.limitValue === undefined ? Infinity : this.limitValue - this.inflightOf(key);
    while (out.length < room && heap.size > 0) {
      const item = heap.pop()!;
      if (this.isLive(item)) out.push(item);
    }
    if (heap.size === 0) this.held.delete(key);
    return out;
  }
}
