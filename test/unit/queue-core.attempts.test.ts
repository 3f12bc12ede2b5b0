import { describe, expect, it } from "vitest";
import { ATTEMPT_ERROR_MAX_BYTES } from "../../src/base/limits.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import { LEASE_TTL_MS, enqueueAll, makeCore, newTask, reload } from "../support/core-fixtures.js";

const attemptsIn = (effects: readonly Effect[]) => effects.filter((e) => e.kind === "recordAttempt");

describe("QueueCore: attempt history", () => {
  it("an attempt's end records its start, worker, end, outcome and error, in the turn of its transition", () => {
    const { core, time } = makeCore();
    const [id] = enqueueAll(core, [newTask()], time.nowMs);
    const startedAtMs = time.nowMs;
    const [plan] = core.lease(1, time.nowMs, undefined, Infinity, "worker-7");
    expect(plan!.taskIds).toEqual([id]);
    core.drain();
    time.advance(250);
    expect(core.settle([{ leaseId: plan!.leaseId, taskId: id!, outcome: "retry", error: "boom" }], time.nowMs)).toEqual([null]);
    const effects = core.drain().effects;
    expect(effects.map((e) => e.kind)).toEqual(["recordAttempt", "retry"]);
    expect(attemptsIn(effects)).toEqual([{
      kind: "recordAttempt", taskId: id, number: 1, startedAtMs, endedAtMs: time.nowMs, workerId: "worker-7", leaseId: plan!.leaseId, outcome: "failed", error: "boom",
    }]);
  });

  it("a running attempt keeps its start and worker across a reload (they are on the row)", () => {
    const { core, time } = makeCore();
    const [id] = enqueueAll(core, [newTask()], time.nowMs);
    const startedAtMs = time.nowMs;
    const [plan] = core.lease(1, time.nowMs, undefined, Infinity, "w-before-restart");
    const activated = core.drain().effects.find((e) => e.kind === "activate");
    expect(activated).toMatchObject({ entry: { attemptStartedAtMs: startedAtMs, attemptWorker: "w-before-restart" } });
    time.advance(100);
    const clone = reload(core, time.nowMs);
    time.advance(LEASE_TTL_MS * 2); // no heartbeat: the reloaded lease lapses
    clone.tick(time.nowMs);
    expect(attemptsIn(clone.drain().effects)).toEqual([expect.objectContaining({
      taskId: id, startedAtMs, workerId: "w-before-restart", outcome: "lease_expired",
    })]);
    expect(plan).toBeDefined();
  });

  it("cuts a long error to ATTEMPT_ERROR_MAX_BYTES with a marker", () => {
    const { core, time } = makeCore();
    const [id] = enqueueAll(core, [newTask()], time.nowMs);
    const [plan] = core.lease(1, time.nowMs);
    core.drain();
    core.settle([{ leaseId: plan!.leaseId, taskId: id!, outcome: "skip_retry", error: "x".repeat(ATTEMPT_ERROR_MAX_BYTES * 2) }], time.nowMs);
    const [attempt] = attemptsIn(core.drain().effects);
    expect(attempt).toMatchObject({ outcome: "failed_no_retry", workerId: "" });
    const error = (attempt as { error: string }).error;
    expect(Buffer.byteLength(error)).toBeLessThanOrEqual(ATTEMPT_ERROR_MAX_BYTES);
    expect(error.startsWith("xxx")).toBe(true);
    expect(error.length).toBeLessThan(ATTEMPT_ERROR_MAX_BYTES * 2);
  });
});
