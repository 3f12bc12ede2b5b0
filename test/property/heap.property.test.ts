import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Heap } from "../../src/grains/queue/heap.js";
import { SlotHeap } from "../../src/grains/queue/slot-heap.js";
import { readyOrder, type ReadyItem } from "../../src/grains/queue/key-slots.js";

describe("Heap properties", () => {
  it("interleaved pushes and pops always pop the best remaining item", () => {
    const op = fc.oneof(
      fc.record({ push: fc.record({ priority: fc.integer({ min: 1, max: 9 }), seq: fc.nat({ max: 50 }) }) }),
      fc.constant({ pop: true as const }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const heap = new Heap<ReadyItem>(readyOrder);
        const model: ReadyItem[] = [];
        for (const o of ops) {
          if ("push" in o) {
            const it = { id: `${o.push.priority}/${o.push.seq}`, ...o.push };
            heap.push(it);
            model.push(it);
          } else {
            model.sort((a, b) => (readyOrder(a, b) ? -1 : readyOrder(b, a) ? 1 : 0));
            const want = model.shift();
            const got = heap.pop();
            expect(got?.priority).toBe(want?.priority);
            expect(got?.seq).toBe(want?.seq);
          }
          expect(heap.size).toBe(model.length);
        }
      }),
      { seed: 11, numRuns: 200 },
    );
  });
});

describe("Heap.retain", () => {
  it("keeps exactly the accepted items, still in heap order", () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 1000 })), fc.integer({ min: 2, max: 5 }), (xs, m) => {
      const h = new Heap<number>((a, b) => a < b);
      for (const x of xs) h.push(x);
      h.retain((x) => x % m !== 0);
      const out: number[] = [];
      for (let x = h.pop(); x !== undefined; x = h.pop()) out.push(x);
      expect(out).toEqual(xs.filter((x) => x % m !== 0).sort((a, b) => a - b));
    }));
  });
});

describe("SlotHeap properties", () => {
  /** Slots index a column of (priority, seq), compared as the packed dispatch heaps do. */
  const columns = (items: ReadonlyArray<{ priority: number; seq: number }>) =>
    (a: number, b: number) => readyOrder({ id: "", ...items[a]! }, { id: "", ...items[b]! });

  it("interleaved pushes and pops always pop the best remaining slot (it grows and shrinks on the way)", () => {
    const op = fc.oneof(
      fc.record({ push: fc.record({ priority: fc.integer({ min: 1, max: 9 }), seq: fc.nat({ max: 50 }) }) }),
      fc.constant({ pop: true as const }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const items: Array<{ priority: number; seq: number }> = [];
        const heap = new SlotHeap(columns(items));
        const model: number[] = [];
        const order = columns(items);
        for (const o of ops) {
          if ("push" in o) {
            items.push(o.push);
            heap.push(items.length - 1);
            model.push(items.length - 1);
          } else {
            model.sort((a, b) => (order(a, b) ? -1 : order(b, a) ? 1 : 0));
            const want = model.shift();
            const got = heap.pop();
            expect(got === undefined ? undefined : items[got]).toEqual(want === undefined ? undefined : items[want]);
          }
          expect(heap.size).toBe(model.length);
        }
      }),
      { seed: 12, numRuns: 200 },
    );
  });

  it("compactIfStale keeps exactly the accepted slots, in heap order, and tells of each one dropped", () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: 1_024, maxLength: 3_000 }), fc.integer({ min: 2, max: 5 }), (seqs, m) => {
      const items = seqs.map((seq) => ({ priority: 1, seq }));
      const heap = new SlotHeap(columns(items));
      items.forEach((_, slot) => heap.push(slot));
      const dropped: number[] = [];
      const keep = (slot: number) => slot % m !== 0;
      heap.compactIfStale(0, keep, (slot) => dropped.push(slot));
      const out: number[] = [];
      for (let s = heap.pop(); s !== undefined; s = heap.pop()) out.push(items[s]!.seq);
      expect(out).toEqual(items.filter((_, slot) => keep(slot)).map((i) => i.seq).sort((a, b) => a - b));
      expect(dropped.sort((a, b) => a - b)).toEqual(items.map((_, slot) => slot).filter((slot) => !keep(slot)));
    }), { seed: 13, numRuns: 30 });
  });

  it("compactIfStale leaves a heap alone while it is small or mostly live", () => {
    const heap = new SlotHeap((a, b) => a < b);
    for (let i = 0; i < 2_000; i++) heap.push(i);
    heap.compactIfStale(600, () => false, () => {});
    expect(heap.size).toBe(2_000);
    heap.compactIfStale(400, () => false, () => {});
    expect(heap.size).toBe(0);
  });
});
