import { describe, expect, it } from "vitest";
import type { QueueCore } from "../../src/grains/queue/queue-core.js";
import {
  LEASE_TTL_MS,
  entryOf,
  enqueueAll,
  leaseIdCounter,
  leasedIds,
  makeCore,
  newTask,
  reload,
  settleOk,
} from "../support/core-fixtures.js";

const KEYS = ["A", "B", "C", ""];

function inflightByKey(core: QueueCore): Record<string, number> {
  return Object.fromEntries(KEYS.map((k) => [k, core.inflightOfKey(k)]));
}

/**
 * A core with every kind of state: active tasks holding key slots, held tasks, pending
 * ones of several priorities, a scheduled one, a retry one, a released one, under
 * a key limit of 2.
 */
function busyCore() {
  const h = makeCore({ newId: leaseIdCounter("orig-") });
  const { core, time } = h;
  const t0 = time.nowMs;
  core.setKeyLimit(2, time.nowMs);
  const tasks = [
    ...Array.from({ length: 4 }, (_, i) => newTask({ concurrencyKey: "A", priority: 9 - i })),
    ...Array.from({ length: 3 }, () => newTask({ concurrencyKey: "B", priority: 5 })),
    ...Array.from({ length: 3 }, (_, i) => newTask({ concurrencyKey: "", priority: 1 + i })),
    newTask({ concurrencyKey: "C", processAtMs: t0 + 5_000 }),
    newTask({ concurrencyKey: "C", priority: 2, uniqueKey: "u-1" }),
  ];
  enqueueAll(core, tasks, t0);
  const plans = core.lease(5, t0 + 1); // A0, A1, B0, B1 + one keyless; A2, A3, B2 held
  settleOk(core, plans[4]!, t0 + 2, { outcome: "retry" }); // keyless task waits in retry
  const more = core.lease(1, t0 + 3);
  settleOk(core, more[0]!, t0 + 4, { outcome: "released" }); // back in its old place
  core.drain();
  return { ...h, tasks, plans, t0 };
}

describe("QueueCore: load (passivation and rebuild)", () => {
  it("a core loaded from snapshot() has the same in-flight counts and dispatches in the same order", () => {
    const { core, time, plans, t0 } = busyCore();
    const now = time.set(t0 + 10);
    const clone = reload(core, now, { newId: leaseIdCounter("clone-") });
    core.drain();
    clone.drain();

    expect(clone.keyLimit).toBe(2);
    expect(clone.paused).toBe(false);
    expect(inflightByKey(clone)).toEqual(inflightByKey(core));
    expect(inflightByKey(clone)).toMatchObject({ A: 2, B: 2, C: 0, "": 0 });
    expect(clone.stats()).toMatchObject({ unfinished: core.stats().unfinished, leases: core.stats().leases, inflightKeyed: 4 });
    expect(clone.pruneAndHasDispatchable(time.nowMs)).toBe(core.pruneAndHasDispatchable(time.nowMs));

    const sameLease = (max: number) => {
      const a = leasedIds(core.lease(max, now));
      const b = leasedIds(clone.lease(max, now));
      expect(b).toEqual(a);
      return a;
    };
    const first = sameLease(100);
    expect(first.length).toBeGreaterThan(0);
    expect(inflightByKey(clone)).toEqual(inflightByKey(core));

    // Lease ids survive the rebuild: the same settlements apply to both cores.
    for (const p of plans.slice(0, 4)) {
      for (const c of [core, clone]) settleOk(c, p, now + 1);
    }
    expect(inflightByKey(clone)).toEqual(inflightByKey(core));
    expect(sameLease(100).length).toBeGreaterThan(0);

    // Time moves on (within the lease TTL): promotions happen the same way.
    for (const c of [core, clone]) c.tick(t0 + 5_000);
    expect(sameLease(100)).toEqual(expect.any(Array));
    const left = (c: QueueCore) => c.snapshot().map((e) => [e.id, e.state, e.seq, e.retried]).sort();
    expect(left(clone)).toEqual(left(core));
  });

  it("loaded rows equal the snapshot, except that active leases get at least a full TTL from now", () => {
    const { core, time, t0 } = busyCore();
    const now = time.set(t0 + 500);
    const clone = reload(core, now);
    const strip = (c: QueueCore) => c.snapshot().map(({ leaseExpiresAtMs: _, ...rest }) => rest);
    expect(strip(clone)).toEqual(strip(core));
    for (const e of clone.snapshot().filter((x) => x.state === "active")) {
      expect(e.leaseExpiresAtMs).toBe(now + LEASE_TTL_MS);
    }
  });

  it("active leases survive a reload: heartbeat and settle by the old lease id, expiry after a TTL from load", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const [a, b] = [newTask(), newTask()];
    enqueueAll(core, [a, b], t0);
    const [pa, pb] = core.lease(2, t0);
    const clone = reload(core, t0 + 900);
    expect(clone.heartbeat([pa!.leaseId], t0 + 900)[0]).toMatchObject({ held: true });
    settleOk(clone, pa!, t0 + 950);
    clone.tick(t0 + 900 + LEASE_TTL_MS - 1);
    expect(entryOf(clone, b.id)?.state).toBe("active");
    clone.tick(t0 + 900 + LEASE_TTL_MS);
    expect(entryOf(clone, b.id)).toMatchObject({ state: "pending", retried: 1 });
    expect(clone.settle([{ leaseId: pb!.leaseId, taskId: b.id, outcome: "success" }], t0 + 2_000)[0]?.reason).toBe("LEASE_NOT_HELD");
  });

  it("after a reload, new tasks queue behind the loaded ones (seq continues)", () => {
    const { core, time } = makeCore();
    const old = [newTask(), newTask()];
    enqueueAll(core, old, time.nowMs);
    const clone = reload(core, time.nowMs);
    const fresh = newTask();
    enqueueAll(clone, [fresh], time.nowMs);
    expect(leasedIds(clone.lease(10, time.nowMs))).toEqual([...old.map((t) => t.id), fresh.id]);
  });

  it("a reload keeps the pause, unique keys and timers", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    core.setPaused(true, time.nowMs);
    const unique = newTask({ uniqueKey: "only-one" });
    const later = newTask({ processAtMs: t0 + 100 });
    const expiring = newTask({ expiresAtMs: t0 + 50 });
    enqueueAll(core, [unique, later, expiring], t0);
    const clone = reload(core, t0 + 10);
    expect(clone.paused).toBe(true);
    expect(clone.lease(10, t0 + 10)).toEqual([]);
    const [dup] = clone.enqueue([newTask({ uniqueKey: "only-one" })], new Map(), t0 + 10, false);
    expect(dup!.ok).toBe(false);
    expect(clone.nextWakeAtMs()).toBe(t0 + 50);
    clone.tick(t0 + 100);
    expect(clone.has(expiring.id)).toBe(false);
    expect(entryOf(clone, later.id)?.state).toBe("pending");
    clone.setPaused(false, time.nowMs);
    expect(leasedIds(clone.lease(10, t0 + 100))).toEqual([unique.id, later.id]);
  });

  it("a unique key whose TTL lapsed before the reload is free after it", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    enqueueAll(core, [newTask({ uniqueKey: "k", uniqueTtlMs: 100, processAtMs: t0 + 10_000 })], t0);
    const clone = reload(core, t0 + 100);
    const [o] = clone.enqueue([newTask({ uniqueKey: "k" })], new Map(), t0 + 100, false);
    expect(o).toMatchObject({ ok: true, existed: false });
  });

  it("a reload under a lower key limit keeps running tasks and holds the rest", () => {
    const { core, time } = makeCore();
    const a = Array.from({ length: 4 }, () => newTask({ concurrencyKey: "A" }));
    enqueueAll(core, a, time.nowMs);
    const plans = core.lease(3, time.nowMs);
    const { core: clone } = makeCore();
    clone.load(core.snapshot(), { paused: false, keyLimit: 2 }, time.nowMs);
    expect(clone.inflightOfKey("A")).toBe(3);
    expect(clone.lease(10, time.nowMs)).toEqual([]);
    settleOk(clone, plans[0]!, time.nowMs);
    settleOk(clone, plans[1]!, time.nowMs);
    expect(leasedIds(clone.lease(10, time.nowMs))).toEqual([a[3]!.id]);
  });
});
