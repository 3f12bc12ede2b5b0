/**
 * A binary min-heap of slot numbers (non-negative integers) ordered by `before(a, b)`,
 * kept in one Int32Array: 4 bytes per item and no object per item, which is what lets a
 * backlog of a million packed tasks wait in dispatch order (packed-tasks.ts) without a
 * million heap items. Like `Heap`, it is used with lazy deletion: the caller decides
 * what a popped slot still means.
 */
/** Below this many items a heap is never compacted: a pass would cost more than it frees. */
const COMPACT_MIN_ITEMS = 1024;
/** A heap is compacted once its items outnumber the live ones this many times. */
const COMPACT_STALE_RATIO = 4;
const INITIAL_CAPACITY = 16;

export class SlotHeap {
  private items = new Int32Array(INITIAL_CAPACITY);
  private length = 0;

  constructor(private readonly before: (a: number, b: number) => boolean) {}

  get size(): number {
    return this.length;
  }

  peek(): number | undefined {
    return this.length > 0 ? this.items[0] : undefined;
  }

  push(slot: number): void {
    if (this.length === this.items.length) {
      const grown = new Int32Array(this.items.length * 2);
      grown.set(this.items);
      this.items = grown;
    }
    const items = this.items;
    let i = this.length++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(slot, items[parent]!)) break;
      items[i] = items[parent]!;
      i = parent;
    }
    items[i] = slot;
  }

  pop(): number | undefined {
    if (this.length === 0) return undefined;
    const items = this.items;
    const top = items[0]!;
    const last = items[--this.length]!;
    if (this.length > 0) this.siftDown(0, last);
    this.shrinkIfSparse();
    return top;
  }

  /**
   * Lazy deletion's memory bound: once the heap holds at least `COMPACT_MIN_ITEMS` items
   * and `COMPACT_STALE_RATIO` times `liveCount`, keeps only the slots `keep` accepts
   * (`drop` is told of each one that goes). O(n).
   */
  compactIfStale(liveCount: number, keep: (slot: number) => boolean, drop: (slot: number) => void): void {
    if (this.length < COMPACT_MIN_ITEMS || this.length < COMPACT_STALE_RATIO * liveCount) return;
    const items = this.items;
    let kept = 0;
    for (let i = 0; i < this.length; i++) {
      const slot = items[i]!;
      if (keep(slot)) items[kept++] = slot;
      else drop(slot);
    }
    this.length = kept;
    for (let i = (kept >> 1) - 1; i >= 0; i--) this.siftDown(i, items[i]!);
    this.shrinkIfSparse();
  }

  /** Places `slot` at `start` or below it, moving better children up. */
  private siftDown(start: number, slot: number): void {
    const items = this.items;
    const n = this.length;
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && this.before(items[right]!, items[left]!) ? right : left;
      if (!this.before(items[child]!, slot)) break;
      items[i] = items[child]!;
      i = child;
    }
    items[i] = slot;
  }

  /** A drained backlog gives its memory back (the array halves once it is a quarter full). */
  private shrinkIfSparse(): void {
    const capacity = this.items.length;
    if (capacity > INITIAL_CAPACITY && this.length * 4 <= capacity) this.items = this.items.slice(0, capacity / 2);
  }
}
