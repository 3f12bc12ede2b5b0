/** The worker registry under a fake clock: presence, in-flight counts, lease holders. */
import { describe, expect, it } from "vitest";
import { WorkerRegistry, type WorkerCall } from "../../src/grains/runtime/worker-registry.js";
import { WORKER_GONE_AFTER_MS } from "../../src/base/limits.js";
import { FakeTime } from "../support/core-fixtures.js";

function harness() {
  const time = new FakeTime();
  const clock = { nowMs: () => time.nowMs, setTimer: () => () => {} };
  return { time, registry: new WorkerRegistry(clock, () => WORKER_GONE_AFTER_MS) };
}

const call = (workerId: string, overrides: Partial<WorkerCall> = {}): WorkerCall => ({
  workerId, host: "h1", queues: ["q"], batchTypes: new Set(), concurrency: 4, ...overrides,
});

describe("WorkerRegistry", () => {
  it("describes each worker from its Lease calls and registration", () => {
    const { time, registry } = harness();
    const t0 = time.nowMs;
    registry.registered("w1", ["email:send", "a:b"]);
    registry.sawLease(call("w1", { batchTypes: new Set(["digest"]), queues: ["mail", "low"] }));
    time.advance(500);
    registry.sawLease(call("w2", { host: "h2", concurrency: 2 }));
    expect(registry.list()).toEqual([
      { workerId: "w1", host: "h1", queues: ["mail", "low"], types: ["a:b", "digest", "email:send"], concurrency: 4,
        inFlight: 0, lastSeenMs: t0, connectedSinceMs: t0, polling: false },
      { workerId: "w2", host: "h2", queues: ["q"], types: [], concurrency: 2,
        inFlight: 0, lastSeenMs: t0 + 500, connectedSinceMs: t0 + 500, polling: false },
    ]);
  });

  it("forgets a worker quiet for WORKER_GONE_AFTER_MS, but never one with a parked call", () => {
    const { time, registry } = harness();
    registry.sawLease(call("quiet"));
    registry.sawLease(call("parked"));
    registry.parked("parked", 1);
    time.advance(WORKER_GONE_AFTER_MS);
    expect(registry.list().map((w) => w.workerId)).toEqual(["parked", "quiet"]);
    time.advance(1);
    expect(registry.list().map((w) => w.workerId)).toEqual(["parked"]);
    expect(registry.list()[0]!.polling).toBe(true);
    registry.parked("parked", -1); // the call ended: seen now
    time.advance(WORKER_GONE_AFTER_MS + 1);
    expect(registry.list()).toEqual([]);
    expect(registry.size).toBe(0);
  });

  it("a heartbeat or settle keeps a busy worker present", () => {
    const { time, registry } = harness();
    registry.sawLease(call("busy"));
    time.advance(WORKER_GONE_AFTER_MS);
    registry.seen("busy");
    time.advance(WORKER_GONE_AFTER_MS);
    expect(registry.list().map((w) => w.workerId)).toEqual(["busy"]);
  });

  it("counts held tasks and names each lease's holder until the lease ends", () => {
    const { time, registry } = harness();
    const t0 = time.nowMs;
    registry.sawLease(call("w"));
    registry.leased("w", [
      { leaseId: "L1", taskIds: ["a"], leaseExpiresAtMs: t0 + 1000 },
      { leaseId: "L2", taskIds: ["b", "c"], leaseExpiresAtMs: t0 + 1000 },
    ]);
    expect(registry.list()[0]!.inFlight).toBe(3);
    expect(registry.holderOf("L2")).toEqual({ workerId: "w", sinceMs: t0 });
    registry.settled("L2", "b");
    expect(registry.list()[0]!.inFlight).toBe(2);
    registry.settled("L2", "c");
    expect(registry.holderOf("L2")).toBeUndefined();
    registry.heartbeat("L1", true, t0 + 5000);
    time.advance(2000); // past the first expiry, before the extended one
    expect(registry.holderOf("L1")).toEqual({ workerId: "w", sinceMs: t0 });
    registry.heartbeat("L1", false, 0);
    expect(registry.holderOf("L1")).toBeUndefined();
    expect(registry.list()[0]!.inFlight).toBe(0);
  });

  it("a lease lapsed without heartbeats has no holder; a drained worker leaves at once", () => {
    const { time, registry } = harness();
    registry.sawLease(call("w"));
    registry.leased("w", [{ leaseId: "L", taskIds: ["a"], leaseExpiresAtMs: time.nowMs + 1000 }]);
    time.advance(1000);
    expect(registry.holderOf("L")).toBeUndefined();
    expect(registry.list()[0]!.inFlight).toBe(0);
    registry.forget("w");
    expect(registry.list()).toEqual([]);
  });

  it("a batch worker counts for its queue and type only while present", () => {
    const { time, registry } = harness();
    registry.sawLease(call("b", { batchTypes: new Set(["digest"]) }));
    expect(registry.canTakeBatches("q", "digest")).toBe(true);
    expect(registry.canTakeBatches("other", "digest")).toBe(false);
    expect(registry.canTakeBatches("q", "x")).toBe(false);
    time.advance(WORKER_GONE_AFTER_MS + 1);
    expect(registry.canTakeBatches("q", "digest")).toBe(false);
  });
});
