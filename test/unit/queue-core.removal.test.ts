import { describe, expect, it } from "vitest";
import { enqueueAll, expectConveyorError, leaseOne, makeCore, newTask } from "../support/core-fixtures.js";

describe("QueueCore: removing a queue", () => {
  it("is refused while a task is unfinished, naming how many, with no effect", () => {
    const { core, time } = makeCore();
    enqueueAll(core, [newTask(), newTask()], time.nowMs);
    leaseOne(core, time.nowMs);
    core.drain();
    expectConveyorError(core.remove(), "FAILED_PRECONDITION", "QUEUE_HAS_UNFINISHED_TASKS");
    expect(core.removalRefusal()?.message).toContain("holds 2 unfinished tasks");
    expect(core.drain().effects).toEqual([]);
  });

  it("with no unfinished task, deletes every group override, the rule keys' limits and the queue row", () => {
    const { core, time } = makeCore();
    const config = { maxSize: 5, maxDelayMs: 1_000, graceMs: 100 };
    core.setGroupConfig("", config, time.nowMs);
    core.setGroupConfig("g1", config, time.nowMs);
    core.setKeyLimit(3, time.nowMs);
    core.drain();
    expect(core.remove()).toBeNull();
    expect(core.drain().effects).toEqual([
      { kind: "deleteGroupConfig", group: "" },
      { kind: "deleteGroupConfig", group: "g1" },
      { kind: "clearSlotLimits" },
      { kind: "deleteQueue" },
    ]);
  });
});

describe("QueueCore: bulk action helpers", () => {
  it("idsInState lists the unfinished tasks of one state in arrival order; stateOf follows them", () => {
    const { core, time } = makeCore();
    const [a, b, c] = [newTask(), newTask({ processAtMs: time.nowMs + 60_000 }), newTask()];
    enqueueAll(core, [a!, b!, c!], time.nowMs);
    expect(core.idsInState("pending")).toEqual([a!.id, c!.id]);
    expect(core.idsInState("scheduled")).toEqual([b!.id]);
    leaseOne(core, time.nowMs);
    expect(core.stateOf(a!.id)).toBe("active");
    expect(core.idsInState("pending")).toEqual([c!.id]);
    expect(core.stateOf("nope")).toBeUndefined();
  });
});
