/**
 * Attempt history (issue 11 item 9) through gRPC on a real node: every lease of a task is
 * kept with its start, end, worker, outcome and error; GetTask returns them, a task keeps
 * its last 25, and deleting a task deletes its attempts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { ATTEMPTS_KEPT_PER_TASK } from "../../src/base/limits.js";
import { NodeProcess } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

beforeAll(async () => {
  node = await NodeProcess.start({ settings: { lease_ttl: "1s" } });
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

describe("attempt history", () => {
  it("a task that fails twice then succeeds shows three attempts, with the worker, outcomes and errors, in both GetTasks", async () => {
    let calls = 0;
    const mux = new Mux().handle("flaky", async () => {
      calls += 1;
      if (calls < 3) throw new Error(`boom ${calls}`);
      return "ok";
    });
    const before = Date.now();
    const info = await sdk.client.enqueue(newTask("flaky", json({})), { queue: "att-flaky", backoff: { base: 10, max: 20 } });
    sdk.worker(mux, { queues: ["att-flaky"], workerId: "worker-att-1" });
    await sdk.waitForState(info.id, "completed");

    const res = await sdk.admin.getTask({ id: info.id });
    expect(res.attempts.map((a) => [a.number, a.outcome, a.error, a.workerId])).toEqual([
      [1, "failed", "boom 1", "worker-att-1"],
      [2, "failed", "boom 2", "worker-att-1"],
      [3, "succeeded", "", "worker-att-1"],
    ]);
    let previousEnd = BigInt(before);
    for (const a of res.attempts) {
      expect(a.startedAtMs).toBeGreaterThanOrEqual(previousEnd);
      expect(a.endedAtMs).toBeGreaterThanOrEqual(a.startedAtMs);
      previousEnd = a.endedAtMs;
    }
    expect((await sdk.taskRpc.getTask({ id: info.id })).attempts).toEqual(res.attempts);
  });

  it("records a lapsed lease and a released delivery, and an operator's cancel of a running attempt", async () => {
    const info = await sdk.client.enqueue(newTask("raw", json({})), { queue: "att-raw" });
    const lease = async (workerId: string) => {
      const res = await sdk.workerRpc.lease({ workerId, queues: [{ queue: "att-raw", weight: 1 }], maxDeliveries: 1, waitMs: 5_000 });
      expect(res.deliveries).toHaveLength(1);
      return res.deliveries[0]!.leaseId;
    };
    await lease("w-lapse"); // never heartbeats: lapses after lease_ttl (1s)
    const released = await lease("w-release"); // the next lease waits for the lapse
    await sdk.workerRpc.settle({ workerId: "w-release", settlements: [{ queue: "att-raw", leaseId: released, taskId: info.id, outcome: Outcome.RELEASED }] });
    await lease("w-cancelled");
    await sdk.admin.cancelTask({ id: info.id });

    const { attempts } = await sdk.admin.getTask({ id: info.id });
    expect(attempts.map((a) => [a.number, a.workerId, a.outcome, a.error])).toEqual([
      [1, "w-lapse", "lease_expired", "lease expired: the worker stopped heartbeating"],
      [2, "w-release", "released", ""],
      [3, "w-cancelled", "cancelled", ""],
    ]);

    // An operator's retry keeps the history, and the next attempt numbers on.
    await sdk.admin.retryTask({ id: info.id });
    const again = await lease("w-after-retry");
    await sdk.workerRpc.settle({ workerId: "w-after-retry", settlements: [{ queue: "att-raw", leaseId: again, taskId: info.id, outcome: Outcome.SUCCESS }] });
    expect((await sdk.admin.getTask({ id: info.id })).attempts.map((a) => [a.number, a.outcome])).toEqual([
      [1, "lease_expired"], [2, "released"], [3, "cancelled"], [4, "succeeded"],
    ]);
  });

  it(`keeps the last ${ATTEMPTS_KEPT_PER_TASK} attempts of a task, numbered on`, async () => {
    const total = ATTEMPTS_KEPT_PER_TASK + 2;
    const info = await sdk.client.enqueue(newTask("many", json({})), { queue: "att-many", maxRetry: total, backoff: { base: 1, max: 1 } });
    for (let i = 1; i <= total; i++) {
      const res = await sdk.workerRpc.lease({ workerId: "w", queues: [{ queue: "att-many", weight: 1 }], maxDeliveries: 1, waitMs: 5_000 });
      const d = res.deliveries[0]!;
      await sdk.workerRpc.settle({ workerId: "w", settlements: [{ queue: "att-many", leaseId: d.leaseId, taskId: info.id, outcome: Outcome.RETRY, error: `e${i}` }] });
    }
    const { attempts } = await sdk.admin.getTask({ id: info.id });
    expect(attempts).toHaveLength(ATTEMPTS_KEPT_PER_TASK);
    expect(attempts[0]).toMatchObject({ number: 3, error: "e3" });
    expect(attempts.at(-1)).toMatchObject({ number: total, error: `e${total}` });
  });

  it("deleting a task deletes its attempts (a new task with the same id starts with none)", async () => {
    const id = "att-reused-id";
    await sdk.client.enqueue(newTask("once", json({})), { queue: "att-delete", taskId: id });
    const res = await sdk.workerRpc.lease({ workerId: "w", queues: [{ queue: "att-delete", weight: 1 }], maxDeliveries: 1, waitMs: 5_000 });
    await sdk.workerRpc.settle({ workerId: "w", settlements: [{ queue: "att-delete", leaseId: res.deliveries[0]!.leaseId, taskId: id, outcome: Outcome.SKIP_RETRY, error: "no" }] });
    expect((await sdk.admin.getTask({ id })).attempts.map((a) => a.outcome)).toEqual(["failed_no_retry"]);
    await sdk.admin.deleteTask({ id });
    await sdk.client.enqueue(newTask("once", json({})), { queue: "att-delete", taskId: id });
    expect((await sdk.admin.getTask({ id })).attempts).toEqual([]);
  });
});
