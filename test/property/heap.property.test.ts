import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Heap } from "../../src/grains/queue/heap.js";
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
