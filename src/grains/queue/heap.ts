/**
 * A binary min-heap ordered by `before(a, b)`. The grain uses it with lazy deletion:
 * entries that no longer match their task are skipped when they reach the top, which
 * keeps every operation O(log n) without an index into the heap.
 */
/** Below this many items a heap is never compacted: a pass would cost more than it frees. */
const COMPACT_MIN_ITEMS = 1024;
/** A heap is compacted once its items outnumber the live ones this many times. */
const COMPACT_STALE_RATIO = 4;

export class Heap<T> {
  private readonly items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  /** How many items `test` accepts (for views; O(n)). */
  count(test: (item: T) => boolean): number {
    let n = 0;
    for (const item of this.items) if (test(item)) n += 1;
    return n;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  /** Keeps only the items `keep` accepts (drops stale entries in bulk), in O(n). */
  retain(keep: (item: T) => boolean): void {
    const kept = this.items.filter(keep);
    this.items.length = 0;
    this.items.push(...kept);
    for (let i = (this.items.length >> 1) - 1; i >= 0; i--) this.siftDown(i);
  }

  /**
   * Lazy deletion's memory bound: once the heap holds at least `COMPACT_MIN_ITEMS` items
   * and `COMPACT_STALE_RATIO` times `liveCount`, keeps only the items `keep` accepts.
   * Memory then follows what is live, not everything ever pushed.
   */
  compactIfStale(liveCount: number, keep: (item: T) => boolean): void {
    if (this.items.length < COMPACT_MIN_ITEMS || this.items.length < COMPACT_STALE_RATIO * liveCount) return;
    this.retain(keep);
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      this.siftDown(0);
    }
    return top;
  }

  private siftDown(start: number): void {
    const items = this.items;
    const n = items.length;
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let best = i;
      if (left < n && this.before(items[left]!, items[best]!)) best = left;
      if (right < n && this.before(items[right]!, items[best]!)) best = right;
      if (best === i) return;
      [items[i], items[best]] = [items[best]!, items[i]!];
      i = best;
    }
  }
}
