/**
 * Bulk actions (issue 11 item 10) through gRPC on a real node: one action on every task
 * of a queue in a state, done in batches inside the grain while it keeps serving; the
 * (action, state) pairs mirror the single-task actions.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { BulkAction } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
import { NodeProcess, eventually } from "../support/node-process.js";
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

async function enqueueMany(queue: string, type: string, n: number, options: { processIn?: string } = {}, padBytes = 64) {
  const items = Array.from({ length: n }, (_, i) => ({ task: newTask(type, json({ i, pad: "x".repeat(padBytes) })), options: { queue, ...options } }));
  const results = await sdk.client.enqueueBatch(items);
  expect(results.filter((r) => r instanceof Error)).toEqual([]);
}

describe("BulkTaskAction", () => {
  it("retries 2,000 archived tasks in batches while a worker keeps completing other tasks of the queue", async () => {
    const queue = "bulk-retry";
    // 2 KiB payloads: a retry batch stops at WORK_SLICE_BYTES, so this is ~17 batches.
    for (let i = 0; i < 4; i++) await enqueueMany(queue, "redo", 500, {}, 2048);
    const archived = await sdk.admin.bulkTaskAction({ queue, state: TaskState.PENDING, action: BulkAction.ARCHIVE });
    expect(archived.affected).toBe(2000n);
    expect(await sdk.counts(queue)).toMatchObject({ archived: 2000, pending: 0 });

    // A worker busy with other tasks of the same queue.
    let others = 0;
    const mux = new Mux().handle("other", async () => {
      others += 1;
    }).handle("redo", async () => {});
    await enqueueMany(queue, "other", 300);
    sdk.worker(mux, { queues: [queue], concurrency: 4 });
    await eventually("the worker to complete some other tasks", async () => (others >= 10 ? true : undefined));

    let bulkAnswered = false;
    const bulk = sdk.admin.bulkTaskAction({ queue, state: TaskState.ARCHIVED, action: BulkAction.RETRY }).finally(() => {
      bulkAnswered = true;
    });
    // While the bulk action runs, a read sees it part done (some batches committed, not
    // all): the grain is between batches. A Lease call sent then is answered before the
    // bulk action is (one turn for all 2,000 could never show a part-done state).
    let leasedDuringBulk: Awaited<ReturnType<typeof sdk.workerRpc.lease>> | undefined;
    let partDone = 0;
    while (!bulkAnswered) {
      const { archived } = await sdk.counts(queue);
      if (archived === 0 || archived === 2000 || bulkAnswered) continue;
      partDone = archived;
      const lease = await sdk.workerRpc.lease({ workerId: "probe", queues: [{ queue, weight: 1 }], maxDeliveries: 1, waitMs: 0 });
      if (!bulkAnswered) leasedDuringBulk = lease;
      break;
    }
    expect(partDone, "a read saw the bulk action part done").toBeGreaterThan(0);
    expect(leasedDuringBulk, "a Lease call was answered while the bulk action was still in progress").toBeDefined();
    const lease = leasedDuringBulk!;
    expect((await bulk).affected).toBe(2000n);
    // Whatever the probe took it gives back.
    for (const d of lease.deliveries) {
      await sdk.workerRpc.settle({ workerId: "probe", settlements: d.tasks.map((t) => ({ queue, leaseId: d.leaseId, taskId: t.id, outcome: 4 })) });
    }

    await eventually("every task to complete", async () => {
      const c = await sdk.counts(queue);
      return c.completed === 2300 ? c : undefined;
    }, 60_000);
    expect(await sdk.counts(queue)).toMatchObject({ archived: 0, pending: 0, completed: 2300 });
  });

  it("cancels, deletes and archives by state, counting only the tasks it changed", async () => {
    const queue = "bulk-states";
    await enqueueMany(queue, "t", 5);
    await enqueueMany(queue, "t", 3, { processIn: "1h" });
    expect((await sdk.admin.bulkTaskAction({ queue, state: TaskState.SCHEDULED, action: BulkAction.CANCEL })).affected).toBe(3n);
    expect((await sdk.admin.bulkTaskAction({ queue, state: TaskState.SCHEDULED, action: BulkAction.CANCEL })).affected).toBe(0n);
    expect((await sdk.admin.bulkTaskAction({ queue, state: TaskState.CANCELLED, action: BulkAction.DELETE })).affected).toBe(3n);
    expect((await sdk.admin.bulkTaskAction({ queue, state: TaskState.PENDING, action: BulkAction.DELETE })).affected).toBe(5n);
    expect(await sdk.counts(queue)).toMatchObject({ pending: 0, scheduled: 0, cancelled: 0 });
  });

  it("refuses pairs the single-task actions refuse, and a missing state or action, naming the field; nothing changes", async () => {
    const queue = "bulk-refused";
    await enqueueMany(queue, "t", 2);
    for (const [state, action, field] of [
      [TaskState.PENDING, BulkAction.RETRY, "state"],
      [TaskState.COMPLETED, BulkAction.ARCHIVE, "state"],
      [TaskState.ACTIVE, BulkAction.DELETE, "state"],
      [TaskState.ARCHIVED, BulkAction.CANCEL, "state"],
      [TaskState.UNSPECIFIED, BulkAction.CANCEL, "state"],
      [TaskState.PENDING, BulkAction.UNSPECIFIED, "action"],
    ] as const) {
      const error = await rejection(sdk.admin.bulkTaskAction({ queue, state, action }));
      expect(error, `${state}/${action}`).toMatchObject({ code: "INVALID_ARGUMENT", field });
    }
    expect(await sdk.counts(queue)).toMatchObject({ pending: 2 });
  });
});
