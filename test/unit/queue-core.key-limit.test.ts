import { describe, expect, it } from "vitest";
import type { DeliveryPlan, QueueCore } from "../../src/grains/queue/queue-core.js";
import type { NewTask } from "../../src/grains/queue/task.js";
import {
  LEASE_TTL_MS,
  entryOf,
  enqueueAll,
  leasedIds,
  makeCore,
  newTask,
  reload,
  settleOk,
} from "../support/core-fixtures.js";

const keyed = (key: string, n: number, overrides: Partial<NewTask> = {}) =>
  Array.from({ length: n }, () => newTask({ concurrencyKey: key, ...overrides }));

function planFor(plans: readonly DeliveryPlan[], id: string): DeliveryPlan {
  const plan = plans.find((p) => p.taskIds.includes(id));
  if (!plan) throw new Error(`no delivery for ${id}`);
  return plan;
}

function activeOfKey(core: QueueCore, key: string): number {
  return core.snapshot().filter((e) => e.state === "active" && e.concurrencyKey === key).length;
}

describe("QueueCore: per-key concurrency limit", () => {
  it("limit 2, 3 tasks per key for two keys and 2 keyless: one lease(100) returns 4 keyed + 2 keyless", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(2, time.nowMs);
    expect(core.keyLimit).toBe(2);
    const a = keyed("A", 3);
    const b = keyed("B", 3);
    const free = [newTask(), newTask()];
    enqueueAll(core, [...a, ...b, ...free], time.nowMs);
    core.drain();

    const plans = core.lease(100, time.nowMs);
    expect(leasedIds(plans)).toEqual([a[0]!.id, a[1]!.id, b[0]!.id, b[1]!.id, free[0]!.id, free[1]!.id]);
    expect(core.inflightOfKey("A")).toBe(2);
    expect(core.inflightOfKey("B")).toBe(2);
    expect(core.inflightOfKey("")).toBe(0);
    expect(core.stats()).toMatchObject({ inflightKeyed: 4, held: 2, leases: 6, unfinished: 8 });
    expect(core.pruneAndHasDispatchable(time.nowMs)).toBe(false);
    expect(core.lease(100, time.nowMs)).toEqual([]);
    expect(core.drain().events).toContainEqual({ kind: "throttled" });

    // Settling one of A makes exactly the held A task dispatchable next.
    settleOk(core, planFor(plans, a[0]!.id), time.advance(1));
    const { readyChanged } = core.drain();
    expect(readyChanged).toBe(true);
    expect(core.pruneAndHasDispatchable(time.nowMs)).toBe(true);
    expect(leasedIds(core.lease(100, time.nowMs))).toEqual([a[2]!.id]);
    expect(core.inflightOfKey("A")).toBe(2);
    expect(entryOf(core, b[2]!.id)?.state).toBe("pending");
  });

  it("a saturated key does not block other keys, even with higher-priority tasks (no head-of-line blocking)", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(1, time.nowMs);
    const hot = keyed("hot", 5, { priority: 9 });
    const cold = keyed("cold", 1, { priority: 1 });
    const free = newTask({ priority: 1 });
    enqueueAll(core, [...hot, ...cold, free], time.nowMs);
    expect(leasedIds(core.lease(1, time.nowMs))).toEqual([hot[0]!.id]);
    // The next call skips the 4 held hot tasks and hands out lower-priority work.
    expect(leasedIds(core.lease(2, time.nowMs))).toEqual([cold[0]!.id, free.id]);
    expect(core.stats().held).toBe(4);
  });

  it("held tasks come back in their original order, before later work of the same priority", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(1, time.nowMs);
    const a = keyed("A", 3);
    enqueueAll(core, a, time.nowMs);
    const plans = core.lease(10, time.nowMs);
    expect(leasedIds(plans)).toEqual([a[0]!.id]);
    const late = newTask({ concurrencyKey: "A" });
    const lateFree = newTask();
    enqueueAll(core, [late, lateFree], time.nowMs);
    settleOk(core, plans[0]!, time.nowMs);
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([a[1]!.id, lateFree.id]);
  });

  it("raising the limit releases held tasks; removing it releases all of them", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(1, time.nowMs);
    const a = keyed("A", 5);
    enqueueAll(core, a, time.nowMs);
    expect(core.lease(10, time.nowMs)).toHaveLength(1);
    core.drain();

    core.setKeyLimit(3, time.nowMs);
    expect(core.drain().readyChanged).toBe(true);
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([a[1]!.id, a[2]!.id]);
    expect(core.inflightOfKey("A")).toBe(3);

    core.setKeyLimit(undefined, time.nowMs);
    expect(core.keyLimit).toBeUndefined();
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([a[3]!.id, a[4]!.id]);
    expect(core.inflightOfKey("A")).toBe(5);
    expect(core.stats().held).toBe(0);
  });

  it("lowering the limit keeps running tasks and holds new ones until in-flight < limit", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(3, time.nowMs);
    const a = keyed("A", 5);
    enqueueAll(core, a, time.nowMs);
    const plans = core.lease(10, time.nowMs);
    expect(leasedIds(plans)).toEqual(a.slice(0, 3).map((t) => t.id));

    core.setKeyLimit(1, time.nowMs);
    for (const p of plans) expect(core.heartbeat([p.leaseId], time.nowMs)[0]?.held).toBe(true);
    expect(core.inflightOfKey("A")).toBe(3);
    expect(core.lease(10, time.nowMs)).toEqual([]);

    settleOk(core, plans[0]!, time.advance(1)); // 2 in flight, limit 1
    expect(core.lease(10, time.nowMs)).toEqual([]);
    settleOk(core, plans[1]!, time.advance(1)); // 1 in flight, limit 1
    expect(core.lease(10, time.nowMs)).toEqual([]);
    settleOk(core, plans[2]!, time.advance(1)); // 0 in flight
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([a[3]!.id]);
    expect(activeOfKey(core, "A")).toBe(1);
  });

  it("a lapsed lease or a cancel frees the key slot", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(1, time.nowMs);
    const a = keyed("A", 3);
    enqueueAll(core, a, time.nowMs);
    leasedIds(core.lease(10, time.nowMs));
    core.tick(time.advance(LEASE_TTL_MS)); // a0 back to pending, keeps its place
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([a[0]!.id]);
    expect(core.cancel(a[0]!.id, "OPERATOR", time.nowMs)).toBeNull();
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([a[1]!.id]);
  });

  it("a released task may retake its own slot (it keeps its place)", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(1, time.nowMs);
    const a = keyed("A", 2);
    enqueueAll(core, a, time.nowMs);
    const [p] = core.lease(10, time.nowMs);
    settleOk(core, p!, time.nowMs, { outcome: "released" });
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([a[0]!.id]);
    expect(core.inflightOfKey("A")).toBe(1);
  });

  it("keyless tasks are never gated and never counted", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(1, time.nowMs);
    enqueueAll(core, Array.from({ length: 5 }, () => newTask()), time.nowMs);
    expect(core.lease(10, time.nowMs)).toHaveLength(5);
    expect(core.stats().inflightKeyed).toBe(0);
  });

  it("emits 'throttled' only when a lease call had to hold a task", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(1, time.nowMs);
    enqueueAll(core, keyed("A", 2), time.nowMs);
    core.drain();
    core.lease(1, time.nowMs);
    expect(core.drain().events).not.toContainEqual({ kind: "throttled" });
    core.lease(1, time.nowMs);
    expect(core.drain().events).toEqual([{ kind: "throttled" }]);
  });

  // Regression: KeySlots.release/setLimit move exactly `limit - inflight` held tasks
  // back into the ready heap, but nothing accounts for them afterwards. If such a task
  // leaves before it is leased (cancel, archive, delete, expiry or deadline at lease
  // time), the slot it was released for is lost: the remaining held tasks of the key
  // stay in the held heap although the key has free slots, and nothing will wake them
  // (no task of that key is in flight any more). A reloaded core does dispatch them.
  it("a held task is dispatched when the task released for its key's free slot is cancelled first", () => {
    const { core, time } = makeCore();
    core.setKeyLimit(1, time.nowMs);
    const [a1, a2, a3] = keyed("A", 3);
    enqueueAll(core, [a1!, a2!, a3!], time.nowMs);
    const [p1] = core.lease(10, time.nowMs); // a1 runs; a2, a3 held
    settleOk(core, p1!, time.advance(1)); // a2 moves back to ready
    expect(core.cancel(a2!.id, "OPERATOR", time.nowMs)).toBeNull();
    expect(core.inflightOfKey("A")).toBe(0);
    // A reloaded core sees a3 as dispatchable at once.
    expect(leasedIds(reload(core, time.nowMs).lease(10, time.nowMs))).toEqual([a3!.id]);
    // Actual: [] (a3 stays held with 0 in flight, pruneAndHasDispatchable(time.nowMs) false, forever
    // unless another A task runs or the limit changes).
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([a3!.id]);
  });

  it("same lost slot when the released task expires before it is leased", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    core.setKeyLimit(1, time.nowMs);
    const a1 = newTask({ concurrencyKey: "A" });
    const a2 = newTask({ concurrencyKey: "A", expiresAtMs: t0 + 150 });
    const a3 = newTask({ concurrencyKey: "A" });
    enqueueAll(core, [a1, a2, a3], t0);
    const [p1] = core.lease(10, t0); // a1 runs; a2, a3 held
    settleOk(core, p1!, t0 + 100); // a2 back to ready
    core.tick(t0 + 150); // a2 expires (archived), a3 is still held
    expect(core.has(a2.id)).toBe(false);
    // Actual: [] with inflightOfKey("A") === 0.
    expect(leasedIds(core.lease(10, t0 + 200))).toEqual([a3.id]);
  });
});
