/**
 * A per-attempt timeout ends the attempt (issue 9, finding 12), through a real node and
 * the SDK Worker: the node fails the attempt at its timeout whatever the worker does and
 * frees the task's key slot; the worker aborts the handler's signal, frees its own slot
 * and ignores the handler's late result.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { NodeProcess, eventually } from "../support/node-process.js";
import { connect, deferred } from "../support/sdk.js";

const TIMEOUT_MS = 500;
/** "Shortly after the timeout": generous for a loaded 2-core machine, far below the 3 s the handler holds on. */
const SLACK_MS = 2_000;

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

/** A queue with a per-key limit of 1, holding a task that times out and the next task of its key. */
async function keyedPair(queue: string, first: { maxRetry: number }) {
  await sdk.admin.setQueueConcurrencyLimit({ queue, max: 1 });
  const stuck = await sdk.client.enqueue(newTask("stuck", json({})), {
    queue, concurrencyKey: "k", timeout: TIMEOUT_MS, maxRetry: first.maxRetry, backoff: { base: "1h", max: "1h" },
  });
  const next = await sdk.client.enqueue(newTask("next", json({})), { queue, concurrencyKey: "k" });
  return { stuck, next };
}

describe("a per-attempt timeout ends the attempt", () => {
  it("a handler that ignores its signal: the next task of its key starts after the timeout, on the freed worker slot; the late result is ignored", async () => {
    const errors: unknown[] = [];
    const stuckStarted = deferred<number>();
    const stuckAborted = deferred<number>();
    const release = deferred();
    const stuckReturned = deferred();
    const nextStarted = deferred<number>();
    const mux = new Mux()
      .handle("stuck", async (_task, ctx) => {
        stuckStarted.resolve(Date.now());
        ctx.signal.addEventListener("abort", () => stuckAborted.resolve(Date.now()));
        await release.promise; // ignores the signal until the test lets go
        stuckReturned.resolve();
        return "too late";
      })
      .handle("next", async () => {
        nextStarted.resolve(Date.now());
        return "ok";
      })
      .handle("probe", async () => "ok");
    // One slot: the next task can only run once the worker has given up the stuck one.
    const worker = sdk.worker(mux, { queues: ["ignores"], concurrency: 1, onError: (e) => errors.push(e) });
    const { stuck, next } = await keyedPair("ignores", { maxRetry: 1 });

    const startedAt = await stuckStarted.promise;
    const abortedAt = await stuckAborted.promise;
    expect(abortedAt - startedAt).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    const nextAt = await nextStarted.promise;
    expect(nextAt - startedAt, "the next task of the key starts shortly after the timeout").toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(nextAt - startedAt).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    await sdk.waitForState(next.id, "completed");

    // The timed-out attempt counts as a failure and backs off; its handler is still running.
    const failed = await sdk.client.getTask(stuck.id);
    expect(failed).toMatchObject({ state: "retry", retried: 1, lastError: `timed out after ${TIMEOUT_MS}ms` });
    expect(worker.inFlight).toBe(0);

    // Its late result is ignored: nothing is settled for that lease.
    release.resolve();
    await stuckReturned.promise;
    const probe = await sdk.client.enqueue(newTask("probe", json({})), { queue: "ignores" });
    await sdk.waitForState(probe.id, "completed"); // a settle round trip after the late return
    expect(await sdk.client.getTask(stuck.id)).toMatchObject({ state: "retry", retried: 1 });
    expect(errors).toEqual([]);
  });

  it("a handler that never returns: the attempt is archived when retries are exhausted, and its key and worker slot are freed", async () => {
    const errors: unknown[] = [];
    const stuckStarted = deferred<number>();
    const nextStarted = deferred<number>();
    const mux = new Mux()
      .handle("stuck", async () => {
        stuckStarted.resolve(Date.now());
        await new Promise(() => {}); // never settles
      })
      .handle("next", async () => {
        nextStarted.resolve(Date.now());
        return "ok";
      });
    const worker = sdk.worker(mux, { queues: ["never"], concurrency: 1, onError: (e) => errors.push(e) });
    const { stuck, next } = await keyedPair("never", { maxRetry: 0 });

    const startedAt = await stuckStarted.promise;
    const nextAt = await nextStarted.promise;
    expect(nextAt - startedAt).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(nextAt - startedAt).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    await sdk.waitForState(next.id, "completed");
    expect(await sdk.client.getTask(stuck.id)).toMatchObject({ state: "archived", retried: 0, lastError: `timed out after ${TIMEOUT_MS}ms` });
    expect(worker.inFlight).toBe(0);
    expect(errors).toEqual([]);
  });

  it("the node enforces it without the SDK: a raw worker that heartbeats and never settles loses the attempt at its timeout", async () => {
    const queue = "raw";
    const { stuck, next } = await keyedPair(queue, { maxRetry: 2 });
    const [first] = await sdk.leaseNow(queue);
    expect(first?.tasks[0]?.id).toBe(stuck.id);
    expect(await sdk.leaseNow(queue)).toEqual([]); // the key is saturated
    const ref = { queue, leaseId: first!.leaseId };

    // Heartbeats keep the lease, not the attempt: after the timeout the lease is gone.
    const lost = await eventually("the node to end the attempt at its timeout", async () => {
      const res = await sdk.workerRpc.heartbeat({ workerId: "raw", leases: [ref] });
      return res.leases[0]!.held ? undefined : res.leases[0]!;
    });
    expect(lost).toMatchObject({ held: false, cancelRequested: false });
    expect(await sdk.client.getTask(stuck.id)).toMatchObject({ state: "retry", retried: 1, lastError: `timed out after ${TIMEOUT_MS}ms` });

    // The key slot is free: the next task of the key dispatches.
    const [second] = await sdk.leaseNow(queue);
    expect(second?.tasks[0]?.id).toBe(next.id);

    // The late settle is refused and changes nothing.
    const res = await sdk.workerRpc.settle({
      workerId: "raw", settlements: [{ queue, leaseId: first!.leaseId, taskId: stuck.id, outcome: Outcome.SUCCESS }],
    });
    expect(res.results[0]?.error?.reason).toBe("LEASE_NOT_HELD");
    expect(await sdk.client.getTask(stuck.id)).toMatchObject({ state: "retry", retried: 1 });
    expect(await node.metrics()).toMatch(/conveyor_attempts_timed_out_total\{queue="raw"\} 1/);
  });
});
