/**
 * Queues that do not exist, and removing a queue (issue 11 item 11), through gRPC on a
 * real node: pause/resume/ListTasks of an unknown queue are NOT_FOUND and leave no trace;
 * settings may be configured ahead of a queue's first task; DeleteQueue removes a queue
 * with no unfinished task, with its finished tasks and settings, and refuses one that
 * has unfinished tasks, naming how many.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
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

const queueNames = async () => (await sdk.admin.listQueues({})).queues.map((q) => q.name);
const queueNamesWithSchedules = async () => (await sdk.admin.listSchedules({})).schedules.map((s) => s.task?.queue);

describe("a queue that does not exist", () => {
  // Pausing a queue ahead of its first task is allowed (test/cli/queue-ahead.test.ts); resuming one writes nothing.
  it("ListTasks, bulk actions and removal answer NOT_FOUND naming the queue; a resume leaves no queue; the name does not appear", async () => {
    expect((await sdk.admin.resumeQueue({ queue: "nosuchqueue" })).queue).toMatchObject({ name: "nosuchqueue", paused: false });
    for (const call of [
      sdk.admin.listTasks({ queue: "nosuchqueue" }),
      sdk.admin.bulkTaskAction({ queue: "nosuchqueue", state: TaskState.ARCHIVED, action: 1 }),
      sdk.admin.deleteQueue({ queue: "nosuchqueue" }),
    ]) {
      const error = await rejection(call);
      expect(error).toMatchObject({ code: "NOT_FOUND", reason: "QUEUE_NOT_FOUND" });
      expect(error.message).toContain('"nosuchqueue"');
    }
    expect(await queueNames()).not.toContain("nosuchqueue");
  });

  it("settings may be configured ahead of the first task, and then pausing it is fine", async () => {
    await sdk.admin.setQueueRateLimit({ queue: "ahead", ratePerSec: 5, burst: 5 });
    const res = await sdk.admin.pauseQueue({ queue: "ahead" });
    expect(res.queue).toMatchObject({ name: "ahead", paused: true });
    expect((await sdk.admin.listTasks({ queue: "ahead" })).tasks).toEqual([]);
  });
});

describe("DeleteQueue", () => {
  it("refuses a queue with unfinished tasks, naming how many, and changes nothing", async () => {
    await sdk.client.enqueue(newTask("t", json({})), { queue: "busy" });
    await sdk.client.enqueue(newTask("t", json({})), { queue: "busy" });
    await sdk.admin.setQueueConcurrencyLimit({ queue: "busy", max: 3 });
    const error = await rejection(sdk.admin.deleteQueue({ queue: "busy" }));
    expect(error).toMatchObject({ code: "FAILED_PRECONDITION", reason: "QUEUE_HAS_UNFINISHED_TASKS" });
    expect(error.message).toContain("holds 2 unfinished tasks");
    expect(await sdk.counts("busy")).toMatchObject({ pending: 2 });
    expect((await sdk.admin.listConcurrencyLimits({})).limits.map((l) => l.queue)).toContain("busy");
  });

  it("removes a queue with only finished tasks, with its settings, and the queue can be used again afresh", async () => {
    const queue = "gone";
    const done = new Set<string>();
    const mux = new Mux().handle("t", async (task) => {
      done.add(task.id);
    });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await sdk.client.enqueue(newTask("t", json({ i })), { queue })).id);
    await sdk.admin.setQueueConcurrencyLimit({ queue, max: 2 });
    await sdk.admin.setQueueRateLimit({ queue, ratePerSec: 100, burst: 10 });
    await sdk.admin.setGroupConfig({ config: { queue, group: "", maxSize: 5, maxDelayMs: 1000n, graceMs: 100n } });
    const worker = sdk.worker(mux, { queues: [queue] });
    for (const id of ids) await sdk.waitForState(id, "completed");
    await worker.stop({ graceMs: 0 });
    await sdk.admin.pauseQueue({ queue });

    const res = await sdk.admin.deleteQueue({ queue });
    expect(res.deletedTasks).toBe(3n);
    expect(await queueNames()).not.toContain(queue);
    expect((await sdk.admin.listConcurrencyLimits({})).limits.map((l) => l.queue)).not.toContain(queue);
    expect((await sdk.admin.listRateLimits({})).limits.map((l) => l.queue)).not.toContain(queue);
    expect((await sdk.admin.listGroupConfigs({ queue })).configs).toEqual([]);
    expect((await rejection(sdk.client.getTask(ids[0]!))).reason).toBe("TASK_NOT_FOUND");
    expect((await sdk.admin.getClusterInfo({})).activeQueues).not.toContain(queue);
    expect((await rejection(sdk.admin.listTasks({ queue }))).reason).toBe("QUEUE_NOT_FOUND");

    // A new task recreates the queue with default settings (not paused, no limits).
    const again = await sdk.client.enqueue(newTask("t", json({})), { queue });
    expect(await sdk.counts(queue)).toMatchObject({ pending: 1, paused: false });
    const w2 = sdk.worker(mux, { queues: [queue] });
    await sdk.waitForState(again.id, "completed");
    await w2.stop({ graceMs: 0 });
    // The new task gave the queue its row again: deleting the task keeps the queue.
    await sdk.admin.deleteTask({ id: again.id });
    expect(await queueNames()).toContain(queue);
    expect((await sdk.admin.pauseQueue({ queue })).queue?.paused).toBe(true);
  });

  it("removes a queue's schedules with it, and a queue with only a schedule exists", async () => {
    const queue = "scheduled-only";
    await sdk.admin.setSchedule({ schedule: {
      name: "hourly", cadence: { case: "cron", value: "0 * * * *" },
      task: { queue, type: "report", payload: new TextEncoder().encode("{}"), contentType: "application/json" },
    } });
    expect(await queueNamesWithSchedules()).toContain(queue);
    await sdk.admin.pauseQueue({ queue }); // exists: it has a setting (its schedule)
    await sdk.admin.deleteQueue({ queue });
    expect(await queueNamesWithSchedules()).not.toContain(queue);
    expect(await rejection(sdk.admin.listTasks({ queue }))).toMatchObject({ code: "NOT_FOUND", reason: "QUEUE_NOT_FOUND" });
  });

  it("deletes finished tasks in batches: a queue with more finished tasks than one batch", async () => {
    const queue = "many-finished";
    const items = Array.from({ length: 1200 }, (_, i) => ({ task: newTask("t", json({ i })), options: { queue } }));
    const results = await sdk.client.enqueueBatch(items);
    expect(results.filter((r) => r instanceof Error)).toEqual([]);
    const archived = await sdk.admin.bulkTaskAction({ queue, state: TaskState.PENDING, action: 2 });
    expect(archived.affected).toBe(1200n);
    const res = await sdk.admin.deleteQueue({ queue });
    expect(res.deletedTasks).toBe(1200n);
    expect(await queueNames()).not.toContain(queue);
  });

  it("refuses a bad queue name, naming the field", async () => {
    const error = await rejection(sdk.admin.deleteQueue({ queue: "bad name" }));
    expect(error).toMatchObject({ code: "INVALID_ARGUMENT", field: "queue" });
  });
});
