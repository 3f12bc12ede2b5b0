/**
 * When the core fires a group, under a fake clock: in the turn of the enqueue that fills
 * it, at exactly its max delay or grace deadline (the core's next wake), at once when a
 * config change makes it full or overdue, and from its durable arrivals after a reload.
 */
import { describe, expect, it } from "vitest";
import type { GroupConfig } from "../../src/grains/queue/group-aggregator.js";
import type { QueueCore } from "../../src/grains/queue/queue-core.js";
import { LEASE_TTL_MS, NO_KNOWN, enqueueAll, makeCore, newTask } from "../support/core-fixtures.js";

const caps = { batchTypes: new Set(["digest"]) };
const slow: GroupConfig = { maxSize: 100, maxDelayMs: 3_600_000, graceMs: 3_600_000 };
const members = (n: number, group = "g") => Array.from({ length: n }, () => newTask({ type: "digest", group }));

/** The ids fired this turn, per batch (from the turn's fireGroup effects). */
function firedBatches(core: QueueCore): string[][] {
  const byBatch = new Map<string, string[]>();
  for (const e of core.drain().effects) {
    if (e.kind !== "fireGroup") continue;
    byBatch.set(e.entry.batchId, [...(byBatch.get(e.entry.batchId) ?? []), e.entry.id]);
  }
  return [...byBatch.values()];
}

const aggregating = (core: QueueCore) => core.listGroups().filter((g) => g.state === "aggregating");
const ids = (tasks: readonly { id: string }[]) => tasks.map((t) => t.id);

describe("a group fires at max size in the turn that fills it", () => {
  it("the enqueue of the last member fires the group, wakes leases and is dispatchable at once", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("g", { ...slow, maxSize: 3 }, time.nowMs);
    const group = members(3);
    enqueueAll(core, group.slice(0, 2), time.nowMs);
    expect(core.drain().readyChanged).toBe(false);
    const [last] = core.enqueue(group.slice(2), NO_KNOWN, time.nowMs, false);
    expect(last).toMatchObject({ ok: true, state: "pending" });
    const turn = core.drain();
    expect(turn.readyChanged).toBe(true); // the shell wakes parked Lease calls after this turn
    expect(turn.effects.map((e) => e.kind)).toEqual(["insert", "fireGroup", "fireGroup", "fireGroup"]);
    expect(core.pruneAndHasDispatchable(time.nowMs, caps)).toBe(true);
    expect(core.lease(10, time.nowMs, caps)).toMatchObject([{ batch: true, group: "g", taskIds: ids(group) }]);
    expect(core.nextWakeAtMs()).toBe(time.nowMs + LEASE_TTL_MS); // no group deadline left, only the lease
  });

  it("one batch enqueue of 250 members makes batches of 100, 100 and keeps 50 aggregating", () => {
    const { core, time } = makeCore();
    const group = members(250);
    enqueueAll(core, group, time.nowMs);
    expect(firedBatches(core)).toEqual([ids(group.slice(0, 100)), ids(group.slice(100, 200))]);
    expect(aggregating(core)).toMatchObject([{ group: "g", size: 50 }]);
  });

  it("10k members into 100 groups of max size 100 fire exactly 100 whole, unmixed batches", () => {
    const { core, time } = makeCore();
    const tasks = Array.from({ length: 10_000 }, (_, i) => newTask({ type: "digest", group: `g${(i * 37) % 100}` }));
    for (let i = 0; i < tasks.length; i += 50) {
      enqueueAll(core, tasks.slice(i, i + 50), time.advance(1));
    }
    const batches = core.lease(1_000, time.nowMs, caps);
    expect(batches).toHaveLength(100);
    const groupOf = new Map(tasks.map((t) => [t.id, t.group]));
    for (const b of batches) {
      expect(b.taskIds).toHaveLength(100);
      expect(new Set(b.taskIds.map((id) => groupOf.get(id))).size).toBe(1);
    }
    expect(core.listGroups()).toEqual([]);
    expect(core.nextWakeAtMs()).toBe(time.nowMs + LEASE_TTL_MS); // no group deadline left, only the leases
  });
});

describe("a group fires by time at exactly its deadline", () => {
  it("max delay: the core's next wake is first member + max delay, and it fires then, not before", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("g", { maxSize: 100, maxDelayMs: 1_000, graceMs: 60_000 }, time.nowMs);
    const t0 = time.nowMs;
    const group = members(3);
    enqueueAll(core, group.slice(0, 1), t0);
    enqueueAll(core, group.slice(1, 2), time.advance(400));
    enqueueAll(core, group.slice(2), time.advance(400));
    core.drain();
    expect(core.nextWakeAtMs()).toBe(t0 + 1_000);
    core.tick(t0 + 999);
    expect(firedBatches(core)).toEqual([]);
    core.tick(t0 + 1_000);
    expect(firedBatches(core)).toEqual([ids(group)]);
    expect(core.nextWakeAtMs()).toBeUndefined();
  });

  it("grace: every member moves the deadline to last member + grace", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("g", { maxSize: 100, maxDelayMs: 60_000, graceMs: 300 }, time.nowMs);
    const group = members(3);
    for (const m of group) {
      enqueueAll(core, [m], time.advance(200));
      expect(core.nextWakeAtMs()).toBe(time.nowMs + 300);
    }
    core.drain();
    core.tick(time.nowMs + 299);
    expect(firedBatches(core)).toEqual([]);
    core.tick(time.nowMs + 300);
    expect(firedBatches(core)).toEqual([ids(group)]);
  });

  it("groups fire each at their own deadline, however many share the queue", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("", { maxSize: 100, maxDelayMs: 500, graceMs: 60_000 }, time.nowMs);
    const t0 = time.nowMs;
    const a = members(1, "a");
    const b = members(1, "b");
    enqueueAll(core, a, t0);
    enqueueAll(core, b, t0 + 120);
    core.drain();
    expect(core.nextWakeAtMs()).toBe(t0 + 500);
    core.tick(t0 + 500);
    expect(firedBatches(core)).toEqual([ids(a)]);
    expect(core.nextWakeAtMs()).toBe(t0 + 620);
    core.tick(t0 + 620);
    expect(firedBatches(core)).toEqual([ids(b)]);
  });

  it("a group whose last member leaves stops waiting; one that keeps a member keeps its deadline", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("", { maxSize: 100, maxDelayMs: 500, graceMs: 60_000 }, time.nowMs);
    const [x, y] = members(2);
    enqueueAll(core, [x!, y!], time.nowMs);
    expect(core.cancel(x!.id, "OPERATOR", time.nowMs)).toBeNull();
    expect(core.nextWakeAtMs()).toBe(time.nowMs + 500);
    expect(core.cancel(y!.id, "OPERATOR", time.nowMs)).toBeNull();
    expect(core.nextWakeAtMs()).toBeUndefined();
  });
});

describe("a config change applies from the next decision", () => {
  it("a group now over its new max size fires at once, in the config change's turn", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("g", slow, time.nowMs);
    const group = members(5);
    enqueueAll(core, group, time.nowMs);
    core.drain();
    core.setGroupConfig("g", { ...slow, maxSize: 2 }, time.nowMs);
    expect(firedBatches(core)).toEqual([ids(group.slice(0, 2)), ids(group.slice(2, 4))]);
    expect(aggregating(core)).toMatchObject([{ group: "g", size: 1 }]);
  });

  it("a changed max delay or grace re-arms the deadline: earlier, later, or already passed", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    core.setGroupConfig("g", slow, t0);
    const group = members(2);
    enqueueAll(core, group, t0);
    expect(core.nextWakeAtMs()).toBe(t0 + 3_600_000);
    core.setGroupConfig("g", { ...slow, maxDelayMs: 2_000 }, time.advance(500));
    expect(core.nextWakeAtMs()).toBe(t0 + 2_000);
    core.setGroupConfig("g", { ...slow, graceMs: 5_000 }, time.nowMs);
    expect(core.nextWakeAtMs()).toBe(t0 + 5_000);
    core.drain();
    core.setGroupConfig("g", { ...slow, maxDelayMs: 100 }, time.nowMs); // first member is 500 ms old
    expect(firedBatches(core)).toEqual([ids(group)]);
    expect(core.nextWakeAtMs()).toBeUndefined();
  });

  it("the queue default reaches groups without an override, and deleting an override falls back to it", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("", slow, time.nowMs);
    core.setGroupConfig("own", slow, time.nowMs);
    const plain = members(2, "plain");
    const own = members(2, "own");
    enqueueAll(core, [...plain, ...own], time.nowMs);
    core.drain();
    core.setGroupConfig("", { ...slow, maxSize: 2 }, time.nowMs);
    expect(firedBatches(core)).toEqual([ids(plain)]); // "own" keeps its override
    expect(core.setGroupConfig("own", undefined, time.nowMs)).toBe(true);
    expect(firedBatches(core)).toEqual([ids(own)]);
  });
});

describe("a reload re-arms groups from their durable arrivals", () => {
  it("a group's deadline is its first member + max delay, not the reload's time + max delay", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const config = { maxSize: 100, maxDelayMs: 10_000, graceMs: 60_000 };
    core.setGroupConfig("g", config, t0);
    const group = members(3);
    enqueueAll(core, group, t0);
    const { core: rebuilt } = makeCore();
    rebuilt.load(core.snapshot(), { paused: false, groupConfigs: new Map([["g", config]]) }, t0 + 4_000);
    expect(rebuilt.nextWakeAtMs()).toBe(t0 + 10_000);
    rebuilt.drain();
    rebuilt.tick(t0 + 10_000);
    expect(firedBatches(rebuilt)).toEqual([ids(group)]);
  });

  it("a group whose deadline passed while the grain was away fires at activation; one over a lowered max size fires on load", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const overdue = members(2, "overdue");
    const big = members(5, "big");
    enqueueAll(core, [...overdue, ...big], t0);
    const { core: rebuilt } = makeCore();
    const configs = new Map([["overdue", { ...slow, maxDelayMs: 1_000 }], ["big", { ...slow, maxSize: 4 }]]);
    rebuilt.load(core.snapshot(), { paused: false, groupConfigs: configs }, t0 + 5_000);
    expect(firedBatches(rebuilt)).toEqual([ids(big.slice(0, 4))]);
    expect(rebuilt.nextWakeAtMs()).toBe(t0 + 1_000); // already due: the shell's activation tick fires it
    rebuilt.tick(t0 + 5_000);
    expect(firedBatches(rebuilt)).toEqual([ids(overdue)]);
  });
});
