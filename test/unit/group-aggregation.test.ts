/** The group fire rule, the deadline heap and batch dispatch of the core, under a fake clock. */
import { describe, expect, it } from "vitest";
import { GroupAggregator, type GroupConfig } from "../../src/grains/queue/group-aggregator.js";
import { GroupDeadlines } from "../../src/grains/queue/group-deadlines.js";
import { NO_KNOWN, makeCore, newTask } from "../support/core-fixtures.js";

const config: GroupConfig = { maxSize: 3, maxDelayMs: 1_000, graceMs: 300 };
const arrivals = new Map<string, number>();
const add = (agg: GroupAggregator, group: string, id: string, atMs: number) => {
  arrivals.set(id, atMs);
  agg.add(group, "t", id, atMs);
};
const take = (agg: GroupAggregator, group: string, maxSize = config.maxSize) => agg.take(group, maxSize, (id) => arrivals.get(id)!);

describe("GroupAggregator fire rule", () => {
  it("is full at max size; a fire takes at most max size, oldest first", () => {
    const agg = new GroupAggregator();
    for (let i = 0; i < 2; i++) add(agg, "g", `m${i}`, 0);
    expect(agg.isFull("g", config)).toBe(false);
    for (let i = 2; i < 5; i++) add(agg, "g", `m${i}`, 0);
    expect(agg.isFull("g", config)).toBe(true);
    expect(take(agg, "g")).toEqual({ group: "g", type: "t", memberIds: ["m0", "m1", "m2"] });
    expect(agg.list()).toMatchObject([{ group: "g", size: 2 }]);
    expect(agg.isFull("g", config)).toBe(false);
  });

  it("fires by time at the earlier of first member + max delay and last member + grace", () => {
    const agg = new GroupAggregator();
    add(agg, "g", "a", 0);
    expect(agg.fireAtMs("g", config)).toBe(300); // grace after the only member
    add(agg, "g", "b", 250);
    expect(agg.fireAtMs("g", config)).toBe(550); // every member restarts the grace
    for (let t = 500; t < 1_000; t += 200) add(agg, "g", `c${t}`, t);
    expect(agg.fireAtMs("g", config)).toBe(1_000); // the max delay caps the debounce
    expect(agg.fireAtMs("other", config)).toBeUndefined();
  });

  it("after a capped fire, the first member's age restarts from the oldest remaining member", () => {
    const agg = new GroupAggregator();
    for (const id of ["a", "b", "c"]) add(agg, "g", id, 0);
    add(agg, "g", "d", 900);
    const slowGrace = { maxSize: 3, maxDelayMs: 1_000, graceMs: 10_000 };
    expect(agg.fireAtMs("g", slowGrace)).toBe(1_000);
    expect(take(agg, "g")?.memberIds).toEqual(["a", "b", "c"]);
    expect(agg.fireAtMs("g", slowGrace)).toBe(1_900);
  });

  it("removing members shrinks the group and drops it when empty; the deadline stays", () => {
    const agg = new GroupAggregator();
    add(agg, "g", "a", 0);
    add(agg, "g", "b", 100);
    agg.remove("g", "a");
    expect(agg.list()).toMatchObject([{ size: 1 }]);
    expect(agg.fireAtMs("g", config)).toBe(400);
    agg.remove("g", "b");
    expect(agg.size).toBe(0);
    expect(agg.typeOf("g")).toBeUndefined();
  });
});

describe("GroupDeadlines", () => {
  it("answers the earliest live deadline and skips those that moved or were disarmed", () => {
    const d = new GroupDeadlines();
    d.arm("a", 500);
    d.arm("b", 300);
    expect(d.nextAtMs()).toBe(300);
    d.arm("b", 700); // b's deadline moved: its item at 300 is stale
    expect(d.nextAtMs()).toBe(500);
    d.disarm("a");
    expect(d.nextAtMs()).toBe(700);
    expect(d.popDue(699)).toBeUndefined();
    expect(d.popDue(700)).toBe("b");
    expect(d.popDue(10_000)).toBeUndefined();
    expect(d.nextAtMs()).toBeUndefined();
  });

  it("pops every due group, earliest first", () => {
    const d = new GroupDeadlines();
    d.arm("late", 200);
    d.arm("early", 100);
    d.arm("future", 900);
    expect([d.popDue(200), d.popDue(200), d.popDue(200)]).toEqual(["early", "late", undefined]);
    expect(d.nextAtMs()).toBe(900);
  });

  it("keeps memory in check while one group's deadline keeps moving", () => {
    const d = new GroupDeadlines();
    d.arm("pinned", 0);
    for (let t = 1; t <= 10_000; t++) d.arm("debounced", t);
    expect(d.nextAtMs()).toBe(0);
    expect(d.popDue(0)).toBe("pinned");
    expect(d.nextAtMs()).toBe(10_000);
  });
});

describe("QueueCore group batches", () => {
  const batchCaps = { batchTypes: new Set(["digest"]) };

  it("hands a fired group to a batch-capable caller only", () => {
    const { core, time } = makeCore();
    core.setGroupConfig("g", { maxSize: 2, maxDelayMs: 60_000, graceMs: 60_000 }, time.nowMs);
    const members = [newTask({ type: "digest", group: "g" }), newTask({ type: "digest", group: "g" })];
    core.enqueue(members, NO_KNOWN, time.nowMs, false);
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
