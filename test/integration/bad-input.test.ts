/**
 * Bad input gets a clear error naming the problem, with the right status code, and
 * changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError, json, newTask, type EnqueueOptions } from "../../src/index.js";
import { TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, rejection } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

beforeAll(async () => {
  node = await NodeProcess.start();
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

async function totalTasks(): Promise<number> {
  const res = await sdk.admin.listQueues({});
  return res.queues.reduce((sum, q) => sum + Object.values(q.counts ?? {}).reduce<number>((s, v) => s + (typeof v === "bigint" ? Number(v) : 0), 0), 0);
}

describe("bad input", () => {
  const cases: Array<[string, string, EnqueueOptions, string, RegExp]> = [
    ["empty type", "", {}, "task.type", /must not be empty/],
    ["bad queue name", "t", { queue: "no spaces please" }, "task.queue", /invalid queue name "no spaces please"/],
    ["priority 10", "t", { priority: 10 }, "task.priority", /1\.\.9/],
    ["negative max retry", "t", { maxRetry: -1 }, "task.max_retry", /must not be negative/],
    ["processAt with processIn", "t", { processAt: new Date(Date.now() + 60_000), processIn: "1m" }, "task.process_at_ms", /mutually exclusive/],
    ["deadline in the past", "t", { deadline: new Date(Date.now() - 1000) }, "task.deadline_at_ms", /in the past/],
    ["group with a concurrency key", "t", { group: "g", concurrencyKey: "k" }, "task.group", /group and concurrency_key/],
  ];
  for (const [name, type, options, field, message] of cases) {
    it(`${name} is INVALID_ARGUMENT naming ${field}, and nothing is stored`, async () => {
      const before = await totalTasks();
      const err = await rejection(sdk.client.enqueue(newTask(type, json({})), options));
      expect(err).toMatchObject({ code: "INVALID_ARGUMENT", field });
      expect(err.message).toMatch(message);
      expect(await totalTasks()).toBe(before);
    });
  }

  it("a payload over 1 MiB is INVALID_ARGUMENT naming the size", async () => {
    const before = await totalTasks();
    const big = { bytes: new Uint8Array(1024 * 1024 + 1), contentType: "application/octet-stream" };
    const err = await rejection(sdk.client.enqueue(newTask("t", big)));
    expect(err).toMatchObject({ code: "INVALID_ARGUMENT", field: "task.payload" });
    expect(err.message).toContain("1048577 bytes");
    expect(await totalTasks()).toBe(before);
  });

  it("an unknown task id is NOT_FOUND", async () => {
    const err = await rejection(sdk.client.getTask("no-such-task"));
    expect(err).toMatchObject({ code: "NOT_FOUND", reason: "TASK_NOT_FOUND" });
    expect(err.message).toContain("no-such-task");
    expect(await rejection(sdk.client.cancelTask("no-such-task"))).toMatchObject({ code: "NOT_FOUND" });
  });

  it("settling a lease that is not held is FAILED_PRECONDITION and changes nothing", async () => {
    const info = await sdk.client.enqueue(newTask("t", json({})), { queue: "bad-settle" });
    const res = await sdk.workerRpc.settle({
      workerId: "w", settlements: [{ queue: "bad-settle", leaseId: "not-a-lease", taskId: info.id, outcome: Outcome.SUCCESS }],
    });
    expect(res.results[0]?.error).toMatchObject({ code: 9 /* FAILED_PRECONDITION */, reason: "LEASE_NOT_HELD" });
    expect(res.results[0]?.error?.message).toContain("not-a-lease");
    expect((await sdk.client.getTask(info.id)).state).toBe("pending");
  });

  it("the same settle sent again (its first answer lost) is answered OK; another outcome under that lease is still refused", async () => {
    const info = await sdk.client.enqueue(newTask("t", json({})), { queue: "settle-again" });
    const leased = await sdk.workerRpc.lease({ workerId: "w", queues: [{ queue: "settle-again", weight: 1 }], maxDeliveries: 1, waitMs: 0 });
    const leaseId = leased.deliveries[0]!.leaseId;
    const settle = (outcome: Outcome) => sdk.workerRpc.settle({ workerId: "w", settlements: [{ queue: "settle-again", leaseId, taskId: info.id, outcome }] });
    expect((await settle(Outcome.SUCCESS)).results[0]?.error).toBeUndefined();
    expect((await settle(Outcome.SUCCESS)).results[0]?.error).toBeUndefined();
    expect((await settle(Outcome.RETRY)).results[0]?.error).toMatchObject({ reason: "LEASE_NOT_HELD" });
    const task = await sdk.taskRpc.getTask({ id: info.id });
    expect(task.task?.state).toBe(TaskState.COMPLETED);
    expect(task.attempts).toHaveLength(1);
  });

  it("a Lease call with no queues or too many deliveries is INVALID_ARGUMENT", async () => {
    await expect(sdk.workerRpc.lease({ workerId: "w", queues: [], maxDeliveries: 1, waitMs: 0 }))
      .rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "queues" });
    await expect(sdk.workerRpc.lease({ workerId: "w", queues: [{ queue: "q", weight: 1 }], maxDeliveries: 0, waitMs: 0 }))
      .rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "max_deliveries" });
  });

  it("an empty or oversized batch is INVALID_ARGUMENT", async () => {
    await expect(sdk.taskRpc.enqueueBatch({ tasks: [] })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "tasks" });
    const tooMany = Array.from({ length: 1001 }, () => ({ task: newTask("t", json({})) }));
    await expect(sdk.client.enqueueTx(tooMany)).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "tasks" });
  });
});
