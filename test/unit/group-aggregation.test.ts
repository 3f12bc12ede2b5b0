/** The group fire rule and batch dispatch of the core, under a fake clock. */
import { describe, expect, it } from "vitest";
import { GroupAggregator, type GroupConfig } from "../../src/grains/queue/group-aggregator.js";
import { NO_KNOWN, makeCore, newTask } from "../support/core-fixtures.js";

const config: GroupConfig = { maxSize: 3, maxDelayMs: 1_000, graceMs: 300 };
const arrivals = new Map<string, number>();
const add = (agg: GroupAggregator, group: string, id: string, atMs: number) => {
  arrivals.set(id, atMs);
  agg.add(group, "t", id, atMs);
};
const sweep = (agg: GroupAggregator, nowMs: number, c = config) => agg.sweep(nowMs, () => c, (id) => arrivals.get(id)!);

describe("GroupAggregator fire rule", () => {
  it("fires at max size, taking at most max size, oldest first", () => {
    const agg = new GroupAggregator();
    for (let i = 0; i < 5; i++) add(agg, "g", `m${i}`, 0);
    expect(sweep(agg, 1)).toEqual([{ group: "g", type: "t", memberIds: ["m0", "m1", "m2"] }]);
    expect(agg.list()).toMatchObject([{ group: "g", size: 2 }]);
    expect(sweep(agg, 2)).toEqual([]); // 2 members, young: no trigger
  });

  it("fires when the first member is max delay old, even while members keep coming", () => {
    const agg = new GroupAggregator();
    add(agg, "g", "a", 0);
    for (let t = 200; t < 1_000; t += 200) {
      add(agg, "g", `b${t}`, t);
      expect(sweep(agg, t, { ...config, maxSize: 100 })).toEqual([]);
    }
    expect(sweep(agg, 1_000, { ...config, maxSize: 100 })[0]?.memberIds).toHaveLength(5);
  });

  it("grace debounces: every member resets it", () => {
    const agg = new GroupAggregator();
    add(agg, "g", "a", 0);
    expect(sweep(agg, 299)).toEqual([]);
    add(agg, "g", "b", 250);
    expect(sweep(agg, 300)).toEqual([]); // 50 ms after b
    expect(sweep(agg, 549)).toEqual([]);
    expect(sweep(agg, 550)[0]?.memberIds).toEqual(["a", "b"]);
  });

  it("after a capped fire, the first member's age restarts from the oldest remaining member", () => {
    const agg = new GroupAggregator();
    add(agg, "g", "a", 0);
    add(agg, "g", "b", 0);
    add(agg, "g", "c", 0);
    add(agg, "g", "d", 900);
    const fired = sweep(agg, 900, { maxSize: 3, maxDelayMs: 1_000, graceMs: 10_000 });
    expect(fired[0]?.memberIds).toEqual(["a", "b", "c"]);
    expect(sweep(agg, 1_800, { maxSize: 3, maxDelayMs: 1_000, graceMs: 10_000 })).toEqual([]);
    expect(sweep(agg, 1_900, { maxSize: 3, maxDelayMs: 1_000, graceMs: 10_000 })[0]?.memberIds).toEqual(["d"]);
  });

  it("removing members shrinks the group and drops it when empty", () => {
    const agg = new GroupAggregator();
    add(agg, "g", "a", 0);
    add(agg, "g", "b", 0);
    agg.remove("g", "a");
    expect(agg.list()).toMatchObject([{ size: 1 }]);
    agg.remove("g", "b");
    expect(agg.size).toBe(0);
    expect(agg.typeOf("g")).toBeUndefined();
  });
});

describe("QueueCore group batches", () => {
  const batchCaps = { batchTypes: new Set(["digest"]) };

  it("sweeps on its own timer and hands a fired group to a batch-capable caller only", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("g", { maxSize: 2, maxDelayMs: 60_000, graceMs: 60_000 }, time.nowMs);
    const members = [newTask({ type: "digest", group: "g" }), newTask({ type: "digest", group: "g" })];
    core.enqueue(members, NO_KNOWN, time.nowMs, false);
    expect(core.lease(10, time.nowMs, batchCaps)).toEqual([]); // not fired before the sweep
    const sweepAt = core.nextWakeAtMs()!;
    expect(sweepAt).toBe(time.nowMs + 1_000);
    time.set(sweepAt);
    core.tick(time.nowMs);
    expect(core.lease(10, time.nowMs)).toEqual([]); // a plain caller never gets a batch
    const [delivery] = core.lease(10, time.nowMs, batchCaps);
    expect(delivery).toMatchObject({ batch: true, group: "g", taskIds: members.map((m) => m.id) });
  });

  it("a member of another type is refused; a member leaving shrinks its group", () => {
    const { core, time } = makeCore();
    const a = newTask({ type: "digest", group: "g" });
    core.enqueue([a], NO_KNOWN, time.nowMs, false);
    const [refused] = core.enqueue([newTask({ type: "other", group: "g" })], NO_KNOWN, time.nowMs, false);
    expect(refused).toMatchObject({ ok: false, error: { code: "INVALID_ARGUMENT", field: "task.type" } });
    expect(core.cancel(a.id, "OPERATOR", time.nowMs)).toBeNull();
    expect(core.listGroups()).toEqual([]);
  });

  it("a lapsed batch lease redelivers the whole batch; a retried member comes back alone", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("", { maxSize: 3, maxDelayMs: 60_000, graceMs: 60_000 }, time.nowMs);
    const members = [1, 2, 3].map(() => newTask({ type: "digest", group: "g" }));
    core.enqueue(members, NO_KNOWN, time.nowMs, false);
    time.advance(1_000);
    core.tick(time.nowMs);
    const [first] = core.lease(10, time.nowMs, batchCaps);
    time.advance(5_000); // the lease lapses
    core.tick(time.nowMs);
    const [again] = core.lease(10, time.nowMs, batchCaps);
    expect(again!.taskIds).toEqual(first!.taskIds);
    core.settle([
      { leaseId: again!.leaseId, taskId: members[0]!.id, outcome: "success" },
      { leaseId: again!.leaseId, taskId: members[1]!.id, outcome: "released" },
      { leaseId: again!.leaseId, taskId: members[2]!.id, outcome: "success" },
    ], time.nowMs);
    const [alone] = core.lease(10, time.nowMs, batchCaps);
    expect(alone).toMatchObject({ batch: true, taskIds: [members[1]!.id] });
  });
});
