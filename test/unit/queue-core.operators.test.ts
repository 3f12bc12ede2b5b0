import { describe, expect, it } from "vitest";
import type { TaskRecord } from "../../src/grains/queue/task.js";
import {
  LEASE_TTL_MS,
  QUEUE,
  entryOf,
  enqueueAll,
  expectConveyorError,
  lastTransition,
  leaseOne,
  leasedIds,
  makeCore,
  newTask,
} from "../support/core-fixtures.js";

describe("QueueCore: pause", () => {
  it("lease returns nothing while paused; resume makes the work dispatchable again", () => {
    const { core, time } = makeCore();
    const t = newTask();
    enqueueAll(core, [t], time.nowMs);
    core.drain();

    core.setPaused(true, time.nowMs);
    expect(core.paused).toBe(true);
    expect(core.drain()).toMatchObject({ effects: [{ kind: "setPaused", paused: true, atMs: time.nowMs }], readyChanged: false });
    expect(core.lease(10, time.nowMs)).toEqual([]);
    expect(core.pruneAndHasDispatchable(time.nowMs)).toBe(false);
    expect(entryOf(core, t.id)?.state).toBe("pending");

    core.setPaused(true, time.nowMs); // no change, no effect
    expect(core.drain().effects).toEqual([]);

    core.setPaused(false, time.nowMs);
    expect(core.drain()).toMatchObject({ effects: [{ kind: "setPaused", paused: false, atMs: time.nowMs }], readyChanged: true });
    expect(core.pruneAndHasDispatchable(time.nowMs)).toBe(true);
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([t.id]);
  });

  it("pausing does not touch running leases", () => {
    const { core, time } = makeCore();
    enqueueAll(core, [newTask()], time.nowMs);
    const plan = leaseOne(core, time.nowMs);
    core.setPaused(true, time.nowMs);
    expect(core.heartbeat([plan.leaseId], time.nowMs)[0]?.held).toBe(true);
    expect(core.settle([{ leaseId: plan.leaseId, taskId: plan.taskIds[0]!, outcome: "success" }], time.nowMs)).toEqual([null]);
  });
});

describe("QueueCore: cancel", () => {
  it("cancels a pending task with its reason and never dispatches it", () => {
    const { core, time } = makeCore();
    const t = newTask();
    enqueueAll(core, [t], time.nowMs);
    core.drain();
    expect(core.cancel(t.id, "OPERATOR", time.advance(5))).toBeNull();
    const { effects, events } = core.drain();
    const tr = lastTransition(effects, t.id);
    expect(tr.state).toBe("cancelled");
    expect(tr.outcome).toEqual({ finishedAtMs: time.nowMs, cancelReason: "OPERATOR" });
    expect(events).toContainEqual({ kind: "settled", outcome: "cancelled", count: 1 });
    expect(core.has(t.id)).toBe(false);
    expect(core.lease(10, time.nowMs)).toEqual([]);
    expect(core.pruneAndHasDispatchable(time.nowMs)).toBe(false);
  });

  it("cancels a scheduled task: it is not promoted later", () => {
    const { core, time } = makeCore();
    const t = newTask({ processAtMs: time.nowMs + 100 });
    enqueueAll(core, [t], time.nowMs);
    expect(core.cancel(t.id, "CONCURRENCY_LIMIT", time.nowMs)).toBeNull();
    core.drain();
    core.tick(time.nowMs + 100);
    expect(core.drain().effects).toEqual([]);
    expect(core.lease(10, time.nowMs + 100)).toEqual([]);
  });

  it("cancels an active task: its lease reports cancelRequested, and settle fails LEASE_NOT_HELD", () => {
    const { core, time } = makeCore();
    const t = newTask({ concurrencyKey: "A" });
    enqueueAll(core, [t], time.nowMs);
    core.setKeyLimit(1, time.nowMs);
    const plan = leaseOne(core, time.nowMs);
    expect(core.inflightOfKey("A")).toBe(1);
    core.drain();

    expect(core.cancel(t.id, "OPERATOR", time.advance(10))).toBeNull();
    const tr = lastTransition(core.drain().effects, t.id);
    expect(tr.state).toBe("cancelled");
    expect(tr.entry).toMatchObject({ leaseId: "", leaseExpiresAtMs: 0 });
    expect(tr.outcome).toEqual({ finishedAtMs: time.nowMs, cancelReason: "OPERATOR" });
    expect(core.inflightOfKey("A")).toBe(0);
    expect(core.stats().leases).toBe(0);

    expect(core.heartbeat([plan.leaseId], time.advance(10))).toEqual([
      { leaseId: plan.leaseId, held: false, cancelRequested: true, cancelReason: "OPERATOR", leaseExpiresAtMs: 0 },
    ]);
    const [error] = core.settle([{ leaseId: plan.leaseId, taskId: t.id, outcome: "success" }], time.nowMs);
    expectConveyorError(error, "FAILED_PRECONDITION", "LEASE_NOT_HELD");
    expect(error?.message).toMatch(/cancelled/);
    expect(core.drain().effects).toEqual([]);

    // The lease's own expiry timer then finds nothing to reclaim.
    core.tick(time.advance(LEASE_TTL_MS));
    expect(core.drain().events).toEqual([]);
    // The cancel notice is kept for one TTL, then forgotten.
    expect(core.heartbeat([plan.leaseId], time.nowMs)[0]).toMatchObject({ held: false, cancelRequested: false });
  });

  it("cancelling an unknown task answers TASK_NOT_FOUND", () => {
    const { core, time } = makeCore();
    expectConveyorError(core.cancel("nope", "OPERATOR", time.nowMs), "NOT_FOUND", "TASK_NOT_FOUND");
  });
});

describe("QueueCore: runNow, archive, delete, revive", () => {
  it("runNow makes a scheduled task pending now, behind tasks already pending", () => {
    const { core, time } = makeCore();
    const s = newTask({ processAtMs: time.nowMs + 60_000 });
    const p = newTask();
    enqueueAll(core, [s, p], time.nowMs);
    expect(core.runNow(s.id)).toBeNull();
    expect(lastTransition(core.drain().effects, s.id).state).toBe("pending");
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([p.id, s.id]);
    expectConveyorError(core.runNow(p.id), "FAILED_PRECONDITION", "TASK_STATE_CONFLICT");
    expectConveyorError(core.runNow("nope"), "NOT_FOUND", "TASK_NOT_FOUND");
  });

  it("runNow of a retry task skips the rest of its backoff", () => {
    const { core, time } = makeCore();
    const t = newTask({ backoffBaseMs: 60_000, backoffMaxMs: 60_000 });
    enqueueAll(core, [t], time.nowMs);
    const plan = leaseOne(core, time.nowMs);
    core.settle([{ leaseId: plan.leaseId, taskId: t.id, outcome: "retry" }], time.nowMs);
    expect(core.runNow(t.id)).toBeNull();
    expect(leasedIds(core.lease(1, time.nowMs))).toEqual([t.id]);
  });

  it("archive dead-letters a waiting task but refuses a running one", () => {
    const { core, time } = makeCore();
    const a = newTask({ priority: 1 });
    const b = newTask({ priority: 9 });
    enqueueAll(core, [a, b], time.nowMs);
    leaseOne(core, time.nowMs); // b
    expect(core.archive(a.id, time.nowMs)).toBeNull();
    expect(lastTransition(core.drain().effects, a.id)).toMatchObject({ state: "archived" });
    expectConveyorError(core.archive(b.id, time.nowMs), "FAILED_PRECONDITION", "TASK_STATE_CONFLICT");
  });

  it("delete removes a waiting task with a delete effect, and refuses a running one", () => {
    const { core, time } = makeCore();
    const a = newTask({ priority: 1 });
    const b = newTask({ priority: 9 });
    enqueueAll(core, [a, b], time.nowMs);
    leaseOne(core, time.nowMs); // b
    core.drain();
    expect(core.delete(a.id)).toBeNull();
    expect(core.drain().effects).toEqual([{ kind: "delete", id: a.id }]);
    expect(core.lease(10, time.nowMs)).toEqual([]);
    expectConveyorError(core.delete(b.id), "FAILED_PRECONDITION", "TASK_STATE_CONFLICT");
  });

  it("revive brings an archived task back to pending with fresh retries, at the back of its priority", () => {
    const { core, time } = makeCore();
    const t = newTask({ maxRetry: 0 });
    enqueueAll(core, [t], time.nowMs);
    core.settle([{ leaseId: leaseOne(core, time.nowMs).leaseId, taskId: t.id, outcome: "retry" }], time.nowMs);
    const archived = lastTransition(core.drain().effects, t.id).entry;
    const other = newTask();
    enqueueAll(core, [other], time.nowMs);
    const record: TaskRecord = {
      ...archived, queue: QUEUE, payload: t.payload, contentType: t.contentType, metadata: {}, createdAtMs: 0,
      retentionMs: t.retentionMs, group: "", lastError: "x", lastFailedAtMs: 0, finishedAtMs: time.nowMs,
      result: new Uint8Array(), cancelReason: "", state: "archived",
    };
    expect(core.revive(record, time.nowMs)).toBeNull();
    expect(entryOf(core, t.id)).toMatchObject({ state: "pending", retried: 0 });
    expect(leasedIds(core.lease(10, time.nowMs))).toEqual([other.id, t.id]);
    expectConveyorError(core.revive({ ...record, state: "completed" }, time.nowMs), "FAILED_PRECONDITION", "TASK_STATE_CONFLICT");
  });
});
