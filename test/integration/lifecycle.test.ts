/**
 * The task lifecycle through the real surfaces: a conveyord process on loopback,
 * driven by the SDK's Client and Worker over gRPC.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError, Mux, json, newTask, skipRetry } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, deferred } from "../support/sdk.js";

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

describe("task lifecycle", () => {
  it("enqueue → process → completed, with the handler's result kept", async () => {
    const seen = deferred<unknown>();
    const mux = new Mux().handle("greet", async (task) => {
      seen.resolve(task.json());
      return { greeting: `hello ${(task.json() as { name: string }).name}` };
    });
    const info = await sdk.client.enqueue(newTask("greet", json({ name: "ada" })), { queue: "life-basic" });
    expect(info).toMatchObject({ queue: "life-basic", state: "pending", existed: false });
    sdk.worker(mux, { queues: ["life-basic"] });
    expect(await seen.promise).toEqual({ name: "ada" });
    const done = await sdk.waitForState(info.id, "completed");
    expect(JSON.parse(new TextDecoder().decode(done.result))).toEqual({ greeting: "hello ada" });
    expect(done.retried).toBe(0);
    expect(done.finishedAt).toBeInstanceOf(Date);
  });

  it("retries a failed attempt with backoff, then succeeds", async () => {
    let attempts = 0;
    const mux = new Mux().handle("flaky", async () => {
      attempts += 1;
      if (attempts < 3) throw new Error(`boom ${attempts}`);
      return "ok";
    });
    const info = await sdk.client.enqueue(newTask("flaky", json({})), { queue: "life-retry", backoff: { base: 20, max: 50 } });
    sdk.worker(mux, { queues: ["life-retry"] });
    const done = await sdk.waitForState(info.id, "completed");
    expect(attempts).toBe(3);
    expect(done.retried).toBe(2);
    expect(done.lastError).toBe("boom 2");
  });

  it("archives a task once its retries are exhausted", async () => {
    let attempts = 0;
    const mux = new Mux().handle("doomed", async () => {
      attempts += 1;
      throw new Error("always fails");
    });
    const info = await sdk.client.enqueue(newTask("doomed", json({})), { queue: "life-exhaust", maxRetry: 2, backoff: { base: 10, max: 20 } });
    sdk.worker(mux, { queues: ["life-exhaust"] });
    const done = await sdk.waitForState(info.id, "archived");
    expect(attempts).toBe(3);
    expect(done.retried).toBe(2);
    expect(done.lastError).toBe("always fails");
  });

  it("SKIP_RETRY archives at once", async () => {
    let attempts = 0;
    const mux = new Mux().handle("bad-input", async () => {
      attempts += 1;
      throw skipRetry(new Error("payload is nonsense"));
    });
    const info = await sdk.client.enqueue(newTask("bad-input", json({})), { queue: "life-skip" });
    sdk.worker(mux, { queues: ["life-skip"] });
    const done = await sdk.waitForState(info.id, "archived");
    expect(attempts).toBe(1);
    expect(done.retried).toBe(0);
    expect(done.lastError).toBe("payload is nonsense");
  });

  it("dispatches the highest priority first and FIFO within a priority", async () => {
    const queue = "life-priority";
    const order: string[] = [];
    for (const [name, priority] of [["low", 1], ["high-1", 9], ["mid", 4], ["high-2", 9], ["default", undefined]] as const) {
      await sdk.client.enqueue(newTask("p", json({ name })), { queue, ...(priority ? { priority } : {}) });
    }
    const all = deferred();
    const mux = new Mux().handle("p", async (task) => {
      order.push(task.json<{ name: string }>().name);
      if (order.length === 5) all.resolve();
    });
    sdk.worker(mux, { queues: [queue], concurrency: 1 });
    await all.promise;
    expect(order).toEqual(["high-1", "high-2", "mid", "default", "low"]);
  });

  it("holds a scheduled task until its time, then runs it", async () => {
    const ran = deferred<number>();
    const mux = new Mux().handle("later", async () => ran.resolve(Date.now()));
    const processAt = new Date(Date.now() + 400);
    const info = await sdk.client.enqueue(newTask("later", json({})), { queue: "life-scheduled", processAt });
    expect(info.state).toBe("scheduled");
    sdk.worker(mux, { queues: ["life-scheduled"] });
    expect(await ran.promise).toBeGreaterThanOrEqual(processAt.getTime());
  });

  it("rejects a duplicate unique key among unfinished tasks with ALREADY_EXISTS", async () => {
    const opts = { queue: "life-unique", uniqueKey: "invoice:7" };
    await sdk.client.enqueue(newTask("u", json({})), opts);
    const err = await sdk.client.enqueue(newTask("u", json({})), opts).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConveyorError);
    expect(err).toMatchObject({ code: "ALREADY_EXISTS", reason: "UNIQUE_KEY_CONFLICT" });
    expect((err as Error).message).toContain("invoice:7");
    expect((await sdk.counts("life-unique")).pending).toBe(1);
  });

  it("treats a repeated task id as the same task (idempotent enqueue)", async () => {
    const opts = { queue: "life-idem", taskId: "order-42-confirmation" };
    const first = await sdk.client.enqueue(newTask("i", json({ n: 1 })), opts);
    const second = await sdk.client.enqueue(newTask("i", json({ n: 2 })), opts);
    expect(first).toMatchObject({ id: "order-42-confirmation", existed: false });
    expect(second).toMatchObject({ id: "order-42-confirmation", existed: true });
    expect((await sdk.client.getTask("order-42-confirmation")).json()).toEqual({ n: 1 });
    expect((await sdk.counts("life-idem")).pending).toBe(1);
  });

  it("EnqueueTx stores all tasks or none", async () => {
    const queue = "life-tx";
    const ok = await sdk.client.enqueueTx([
      { task: newTask("t", json({ n: 1 })), options: { queue } },
      { task: newTask("t", json({ n: 2 })), options: { queue, uniqueKey: "k1" } },
    ]);
    expect(ok).toHaveLength(2);
    const conflict = await sdk.client.enqueueTx([
      { task: newTask("t", json({ n: 3 })), options: { queue } },
      { task: newTask("t", json({ n: 4 })), options: { queue, uniqueKey: "k1" } },
    ]).catch((e: unknown) => e);
    expect(conflict).toMatchObject({ code: "ALREADY_EXISTS" });
    expect((conflict as Error).message).toContain("tasks[1]");
    const invalid = await sdk.client.enqueueTx([
      { task: newTask("t", json({ n: 5 })), options: { queue } },
      { task: newTask("t", json({ n: 6 })), options: { queue, priority: 10 } },
    ]).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ code: "INVALID_ARGUMENT", field: "tasks[1].priority" });
    expect((await sdk.counts(queue)).pending).toBe(2);
  });

  it("EnqueueBatch reports each item on its own", async () => {
    const queue = "life-batch";
    const results = await sdk.client.enqueueBatch([
      { task: newTask("b", json({})), options: { queue } },
      { task: newTask("", json({})), options: { queue } },
      { task: newTask("b", json({})), options: { queue } },
    ]);
    expect(results[0]).toMatchObject({ state: "pending" });
    expect(results[1]).toBeInstanceOf(ConveyorError);
    expect(results[1]).toMatchObject({ code: "INVALID_ARGUMENT", field: "tasks[1].type" });
    expect(results[2]).toMatchObject({ state: "pending" });
    expect((await sdk.counts(queue)).pending).toBe(2);
  });

  it("a graceful stop releases an unfinished task without spending a retry", async () => {
    const queue = "life-release";
    const started = deferred();
    const aborted = deferred<unknown>();
    const mux = new Mux().handle("long", async (_task, { signal }) => {
      started.resolve();
      await new Promise((resolve) => signal.addEventListener("abort", resolve));
      aborted.resolve(signal.reason);
      throw signal.reason;
    });
    const info = await sdk.client.enqueue(newTask("long", json({})), { queue });
    const worker = sdk.worker(mux, { queues: [queue] });
    await started.promise;
    await worker.stop({ graceMs: 0 });
    expect(String(await aborted.promise)).toContain("worker stopping");
    const task = await sdk.waitForState(info.id, "pending");
    expect(task.retried).toBe(0);
  });

  it("a worker with a fixed id that stops and starts again gets work at once", async () => {
    const queue = "life-fixed-id";
    const first = sdk.worker(new Mux().handle("f", async () => {}), { queues: [queue], workerId: "fixed-worker" });
    await first.registered;
    await first.stop({ graceMs: 0 }); // fences "fixed-worker" off while its Lease calls may be in flight
    const ran = deferred();
    sdk.worker(new Mux().handle("f", async () => ran.resolve()), { queues: [queue], workerId: "fixed-worker" });
    await sdk.client.enqueue(newTask("f", json({})), { queue });
    await ran.promise;
  });

  it("operator actions: cancel, archive, run now, retry, delete", async () => {
    const queue = "life-admin";
    const a = await sdk.client.enqueue(newTask("x", json({})), { queue });
    const b = await sdk.client.enqueue(newTask("x", json({})), { queue, processIn: "1h" });
    expect((await sdk.client.cancelTask(a.id))).toMatchObject({ state: "cancelled", cancelReason: "OPERATOR" });
    const again = await sdk.client.cancelTask(a.id).catch((e: unknown) => e);
    expect(again).toMatchObject({ code: "FAILED_PRECONDITION" });
    expect((await sdk.admin.runTask({ id: b.id })).task?.state).toBe(2 /* PENDING */);
    expect((await sdk.admin.archiveTask({ id: b.id })).task?.state).toBe(7 /* ARCHIVED */);
    expect((await sdk.admin.retryTask({ id: b.id })).task).toMatchObject({ state: 2, retried: 0 });
    expect((await sdk.admin.retryTask({ id: a.id })).task?.state).toBe(2);
    await sdk.admin.cancelTask({ id: b.id });
    await sdk.admin.deleteTask({ id: b.id });
    const gone = await sdk.client.getTask(b.id).catch((e: unknown) => e);
    expect(gone).toMatchObject({ code: "NOT_FOUND" });
  });

  it("pausing a queue stops dispatch; resuming restarts it", async () => {
    const queue = "life-pause";
    // A queue exists once it has a task (or a setting): pause it before any worker runs.
    const info = await sdk.client.enqueue(newTask("p", json({})), { queue });
    await sdk.admin.pauseQueue({ queue });
    const ran = deferred();
    sdk.worker(new Mux().handle("p", async () => ran.resolve()), { queues: [queue] });
    expect((await sdk.counts(queue)).paused).toBe(true);
    expect(await sdk.leaseNow(queue)).toEqual([]); // the node's decision now: nothing is dispatchable
    expect((await sdk.client.getTask(info.id)).state).toBe("pending");
    await sdk.admin.resumeQueue({ queue });
    await ran.promise;
    await sdk.waitForState(info.id, "completed");
  });
});
