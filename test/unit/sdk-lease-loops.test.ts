/**
 * The pure parts of the worker's lease loop per owner: which loop polls which queue
 * (queue-placement.ts) and the one slot budget they share (slot-budget.ts).
 */
import { describe, expect, it } from "vitest";
import { MAIN, QueuePlacement, ROUTE_COOLDOWN_MAX_MS } from "../../src/sdk/queue-placement.js";
import { leaseShare, SlotBudget } from "../../src/sdk/slot-budget.js";

const q = (...names: string[]) => names.map((queue) => ({ queue, weight: 1 }));
const names = (list: Array<{ queue: string }>) => list.map((x) => x.queue);

describe("QueuePlacement", () => {
  it("starts with every queue on the main loop and moves routed queues to their owner's address, keeping the worker's order", () => {
    const p = new QueuePlacement(q("a", "b", "c", "d"), "n1:1");
    expect(names(p.queuesOf(MAIN))).toEqual(["a", "b", "c", "d"]);
    expect(p.route(MAIN, [{ queue: "d", address: "n3:1" }, { queue: "b", address: "n3:1" }, { queue: "c", address: "n2:1" }], 0)).toBe(true);
    expect(names(p.queuesOf(MAIN))).toEqual(["a"]);
    expect(names(p.queuesOf("n3:1"))).toEqual(["b", "d"]);
    expect(p.addresses().sort()).toEqual(["n2:1", "n3:1"]);
  });

  it("moves only queues the answering loop polls (a late answer cannot undo a newer move), ignores unknown queues and empty addresses", () => {
    const p = new QueuePlacement(q("a", "b"), "n1:1");
    p.route(MAIN, [{ queue: "a", address: "n2:1" }], 0);
    expect(p.route(MAIN, [{ queue: "a", address: "n3:1" }, { queue: "zzz", address: "n3:1" }, { queue: "b", address: "" }], 0)).toBe(false);
    expect(names(p.queuesOf("n2:1"))).toEqual(["a"]);
    expect(p.addresses()).toEqual(["n2:1"]);
    // The owner's loop can send it on (a partition that moved).
    expect(p.route("n2:1", [{ queue: "a", address: "n3:1" }], 0)).toBe(true);
    expect(names(p.queuesOf("n3:1"))).toEqual(["a"]);
  });

  it("a route naming the main node's address brings the queue back to the main loop", () => {
    const p = new QueuePlacement(q("a"), "n1:1");
    p.route(MAIN, [{ queue: "a", address: "n2:1" }], 0);
    p.route("n2:1", [{ queue: "a", address: "n1:1" }], 0);
    expect(names(p.queuesOf(MAIN))).toEqual(["a"]);
    expect(p.addresses()).toEqual([]);
  });

  it("a hand-back returns the loop's queues to the main loop, and routes to that address are ignored for a doubling cool-down", () => {
    const p = new QueuePlacement(q("a", "b"), "n1:1");
    p.route(MAIN, [{ queue: "a", address: "n3:1" }, { queue: "b", address: "n2:1" }], 0);
    p.handBack("n3:1", 1_000);
    expect(names(p.queuesOf(MAIN))).toEqual(["a"]);
    expect(names(p.queuesOf("n2:1"))).toEqual(["b"]);
    expect(p.anyCoolingDown(1_999)).toBe(true);
    expect(p.route(MAIN, [{ queue: "a", address: "n3:1" }], 1_999)).toBe(false);
    expect(p.anyCoolingDown(2_000)).toBe(false);
    expect(p.route(MAIN, [{ queue: "a", address: "n3:1" }], 2_000)).toBe(true);
    // Again without an answer from n3 in between: twice as long.
    p.handBack("n3:1", 10_000);
    expect(p.route(MAIN, [{ queue: "a", address: "n3:1" }], 11_999)).toBe(false);
    expect(p.route(MAIN, [{ queue: "a", address: "n3:1" }], 12_000)).toBe(true);
    // An answer from n3 starts the cool-down over.
    p.reached("n3:1");
    p.handBack("n3:1", 20_000);
    expect(p.anyCoolingDown(20_999)).toBe(true);
    expect(p.anyCoolingDown(21_000)).toBe(false);
  });

  it("the cool-down is capped", () => {
    const p = new QueuePlacement(q("a"), "n1:1");
    let now = 0;
    for (let i = 0; i < 12; i++) {
      p.route(MAIN, [{ queue: "a", address: "n3:1" }], now);
      p.handBack("n3:1", now);
      now += ROUTE_COOLDOWN_MAX_MS;
    }
    // The twelfth hand-back, at now - MAX, cools down for MAX (not 2^11 s).
    expect(p.anyCoolingDown(now - 1)).toBe(true);
    expect(p.route(MAIN, [{ queue: "a", address: "n3:1" }], now)).toBe(true);
  });
});

describe("SlotBudget", () => {
  const never = new AbortController().signal;

  it("reserved and running slots together never exceed the total", async () => {
    let running = 0;
    const budget = new SlotBudget(3, () => running);
    expect(await budget.reserve((free) => free, never)).toBe(3);
    expect(budget.free).toBe(0);
    // The answer brought 2 deliveries: they run, the third slot comes back.
    running = 2;
    budget.release(3);
    expect(budget.free).toBe(1);
    expect(await budget.reserve(() => 5, never)).toBe(1);
  });

  it("a loop waits for a free slot; loops are served first come, first served", async () => {
    let running = 0;
    const budget = new SlotBudget(1, () => running);
    expect(await budget.reserve(() => 1, never)).toBe(1);
    const order: string[] = [];
    const first = budget.reserve(() => 1, never).then((n) => order.push(`first:${n}`));
    const second = budget.reserve(() => 1, never).then((n) => order.push(`second:${n}`));
    await Promise.resolve();
    expect(order).toEqual([]);
    running = 1;
    budget.release(1); // the answer's one delivery runs: still no free slot
    await Promise.resolve();
    expect(order).toEqual([]);
    running = 0;
    budget.freed();
    await first;
    expect(order).toEqual(["first:1"]);
    budget.release(1);
    await second;
    expect(order).toEqual(["first:1", "second:1"]);
  });

  it("a waiting loop gets 0 when the worker stops, and leaves the line", async () => {
    const budget = new SlotBudget(1, () => 1);
    const stop = new AbortController();
    const waiting = budget.reserve(() => 1, stop.signal);
    stop.abort();
    expect(await waiting).toBe(0);
    expect(await budget.reserve(() => 1, stop.signal)).toBe(0);
  });

  it("never reserves more than is free, and at least one", async () => {
    const budget = new SlotBudget(4, () => 1);
    expect(await budget.reserve(() => 0, never)).toBe(1);
    expect(await budget.reserve(() => 100, never)).toBe(2);
  });
});

describe("leaseShare", () => {
  it("one loop asks for every free slot, as a worker on a single node always did", () => {
    expect(leaseShare(10, 1, 1, true)).toBe(10);
  });
  it("with several loops an idle one parks with one slot and a busy one takes an equal share with the loops not parked", () => {
    expect(leaseShare(10, 3, 3, true)).toBe(1);
    expect(leaseShare(10, 3, 3, false)).toBe(4);
    expect(leaseShare(10, 3, 1, false)).toBe(10);
  });
});
