import { describe, expect, it } from "vitest";
import { seededRandom, type Random } from "../../src/base/random.js";
import { retryDelayMs } from "../../src/grains/queue/backoff.js";
import { Heap } from "../../src/grains/queue/heap.js";
import { KeySlots, QUEUE_RULE, readyOrder, slotOf, type ReadyItem } from "../../src/grains/queue/key-slots.js";
import { NO_KNOWN, makeCore, newTask } from "../support/core-fixtures.js";

const fixed = (value: number): Random => ({ next: () => value });

describe("retryDelayMs (equal jitter)", () => {
  it("first retry: [base/2, base]", () => {
    expect(retryDelayMs(1, 1_000, 60_000, fixed(0))).toBe(500);
    expect(retryDelayMs(1, 1_000, 60_000, fixed(0.999_999))).toBe(1_000);
    expect(retryDelayMs(1, 1_000, 60_000, fixed(0.5))).toBe(750);
  });

  it("doubles per retry up to the cap", () => {
    expect(retryDelayMs(2, 1_000, 60_000, fixed(0))).toBe(1_000);
    expect(retryDelayMs(3, 1_000, 60_000, fixed(0))).toBe(2_000);
    expect(retryDelayMs(10, 1_000, 60_000, fixed(0))).toBe(30_000);
    expect(retryDelayMs(1_000, 1_000, 60_000, fixed(0))).toBe(30_000); // exponent capped, no Infinity
  });

  it("retried 0 is treated like the first retry", () => {
    expect(retryDelayMs(0, 1_000, 60_000, fixed(0))).toBe(500);
  });

  it("stays within [cap/2, cap] under a seeded random", () => {
    const random = seededRandom(3);
    for (let r = 1; r <= 12; r++) {
      const cap = Math.min(10_000, 100 * 2 ** (r - 1));
      for (let i = 0; i < 50; i++) {
        const d = retryDelayMs(r, 100, 10_000, random);
        expect(d).toBeGreaterThanOrEqual(cap / 2);
        expect(d).toBeLessThanOrEqual(cap);
      }
    }
  });
});

describe("seededRandom", () => {
  it("is deterministic per seed and in [0, 1)", () => {
    const a = seededRandom(9);
    const b = seededRandom(9);
    for (let i = 0; i < 100; i++) {
      const x = a.next();
      expect(b.next()).toBe(x);
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x).toBeLessThan(1);
    }
    expect(seededRandom(10).next()).not.toBe(seededRandom(9).next());
  });
});

describe("Heap", () => {
  it("pops in order and reports its size", () => {
    const h = new Heap<number>((a, b) => a < b);
    for (const n of [5, 1, 4, 1, 9, 2]) h.push(n);
    expect(h.size).toBe(6);
    expect(h.peek()).toBe(1);
    const out: number[] = [];
    for (let x = h.pop(); x !== undefined; x = h.pop()) out.push(x);
    expect(out).toEqual([1, 1, 2, 4, 5, 9]);
    expect(h.pop()).toBeUndefined();
    expect(h.size).toBe(0);
  });

  it("compactIfStale drops stale items only once they are many and outnumber the live ones four to one", () => {
    const filled = (n: number) => {
      const h = new Heap<number>((a, b) => a < b);
      for (let i = 0; i < n; i++) h.push(i);
      return h;
    };
    const even = (x: number) => x % 2 === 0;
    const small = filled(1_023);
    small.compactIfStale(0, even);
    expect(small.size).toBe(1_023); // too few to be worth a pass
    const busy = filled(4_000);
    busy.compactIfStale(1_001, even);
    expect(busy.size).toBe(4_000); // fewer than four per live one
    const stale = filled(4_000);
    stale.compactIfStale(1_000, even);
    expect(stale.size).toBe(2_000);
    expect(stale.pop()).toBe(0);
    expect(stale.pop()).toBe(2); // still a heap after the pass
  });
});

describe("KeySlots", () => {
  const item = (id: string, seq: number, priority = 4): ReadyItem => ({ id, priority, seq });

  it("readyOrder: higher priority first, then lower seq", () => {
    expect(readyOrder(item("a", 9, 9), item("b", 1, 4))).toBe(true);
    expect(readyOrder(item("a", 1), item("b", 2))).toBe(true);
    expect(readyOrder(item("a", 2), item("b", 1))).toBe(false);
  });

  const A = slotOf(QUEUE_RULE, "A");
  const B = slotOf(QUEUE_RULE, "B");

  it("saturation, hold and release hand back exactly the free slots' worth, in order", () => {
    const live = new Set(["h1", "h2", "h3"]);
    const slots = new KeySlots((i) => live.has(i.id));
    slots.setRuleLimit(QUEUE_RULE, 2);
    slots.acquire(A);
    slots.acquire(A);
    expect(slots.inflightOf(A)).toBe(2);
    expect(slots.inflightOf(B)).toBe(0);
    expect(slots.isSaturated(A)).toBe(true);
    expect(slots.isSaturated(B)).toBe(false);
    expect(slots.isSaturated(slotOf("other-rule", "A"))).toBe(false);
    slots.hold(A, item("h3", 3));
    slots.hold(A, item("h1", 1));
    slots.hold(A, item("h2", 2));
    expect(slots.heldTotal()).toBe(3);
    expect(slots.release(A).map((i) => i.id)).toEqual(["h1"]);
    live.delete("h2"); // a held task that went away is skipped, and does not use the slot
    expect(slots.heldTotal()).toBe(1); // and is no longer counted as held
    expect(slots.release(A).map((i) => i.id)).toEqual(["h3"]);
    expect(slots.heldTotal()).toBe(0);
    expect(() => slots.release(A)).toThrow(/released twice/);
  });

  it("clearing the rule limit frees every held item", () => {
    const slots = new KeySlots(() => true);
    slots.setRuleLimit(QUEUE_RULE, 1);
    slots.acquire(A);
    slots.hold(A, item("x", 1));
    slots.hold(B, item("y", 2));
    expect(slots.setRuleLimit(QUEUE_RULE, undefined).map((i) => i.id).sort()).toEqual(["x", "y"]);
    expect(slots.limit).toBeUndefined();
  });

  it("a slot's own (dynamic) limit wins over the rule's, and raising it frees held items", () => {
    const slots = new KeySlots(() => true);
    const s = slotOf("t#0", "k");
    slots.setSlotLimit(s, 1);
    slots.acquire(s);
    expect(slots.isSaturated(s)).toBe(true);
    slots.hold(s, item("x", 1));
    slots.hold(s, item("y", 2));
    expect(slots.setSlotLimit(s, 3).map((i) => i.id)).toEqual(["x", "y"]);
  });
});

describe("timer compaction", () => {
  it("timers of finished tasks do not pile up (far deadlines, many tasks)", () => {
    const { core, time } = makeCore();
    const far = time.nowMs + 365 * 86_400_000;
    for (let round = 0; round < 5; round++) {
      const tasks = Array.from({ length: 1_000 }, () => newTask({ deadlineAtMs: far, expiresAtMs: far }));
      core.enqueue(tasks, NO_KNOWN, time.nowMs, false);
      for (const plan of core.lease(1_000, time.nowMs)) {
        core.settle([{ leaseId: plan.leaseId, taskId: plan.taskIds[0]!, outcome: "success" }], time.nowMs);
      }
      core.drain();
    }
    core.tick(time.advance(1));
    expect(core.stats()).toMatchObject({ unfinished: 0 });
    expect(core.stats().timers).toBeLessThan(2_048);
  });
});
