/**
 * Per-key concurrency limits through the real surfaces. Dispatch decisions are checked
 * with raw Lease/Settle RPCs (a lease call returns exactly what is dispatchable at that
 * instant), the seed's example and the mutex with the SDK worker, limits set with the CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { Outcome, type Delivery } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { NodeProcess, eventually } from "../support/node-process.js";
import { connect, deferred, runCli } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

const cli = (...args: string[]) => runCli(node, ...args);

beforeAll(async () => {
  node = await NodeProcess.start({ settings: { lease_ttl: "30s" } });
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

/** Runs `body` against a node with short leases (for the lease-expiry exit paths). */
async function withShortLeases(body: () => Promise<void>): Promise<void> {
  const main = { node, sdk };
  node = await NodeProcess.start({ settings: { lease_ttl: "400ms" } });
  sdk = connect(node);
  try {
    await body();
  } finally {
    await sdk.close();
    await node.stop();
    node.cleanup();
    ({ node, sdk } = main);
  }
}

const leaseNow = (queue: string, max?: number) => sdk.leaseNow(queue, max);

async function settle(d: Delivery, outcome: Outcome, error = "") {
  const res = await sdk.workerRpc.settle({
    workerId: "test", settlements: [{ queue: d.queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome, error }],
  });
  expect(res.results[0]?.error).toBeUndefined();
}

const keyOf = (d: Delivery) => d.tasks[0]!.concurrencyKey;
const countByKey = (ds: Delivery[]) => ds.reduce<Record<string, number>>((m, d) => ({ ...m, [keyOf(d)]: (m[keyOf(d)] ?? 0) + 1 }), {});

async function enqueueKeyed(queue: string, key: string, n: number, extra: object = {}) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await sdk.client.enqueue(newTask("work", json({ key, i })), { queue, concurrencyKey: key, ...extra }));
  return out;
}

describe("per-key concurrency limits", () => {
  it("the seed's worked example: reports --max 2, two customers and keyless tasks", async () => {
    const queue = "reports";
    expect((await cli("concurrency", "set", queue, "--max", "2")).stdout).toContain("at most 2");
    for (const customer of ["customer:1", "customer:2"]) await enqueueKeyed(queue, customer, 3);
    await sdk.client.enqueue(newTask("work", json({ keyless: 1 })), { queue });
    await sdk.client.enqueue(newTask("work", json({ keyless: 2 })), { queue });

    const running = new Map<string, () => void>();
    let releaseAll = false;
    const starts: string[] = [];
    const startWaiters: Array<{ n: number; resolve: () => void }> = [];
    const started = (n: number) => new Promise<void>((resolve) => {
      if (starts.length >= n) resolve();
      else startWaiters.push({ n, resolve });
    });
    const mux = new Mux().handle("work", (task) => new Promise<void>((resolve) => {
      if (releaseAll) return resolve();
      running.set(task.id, resolve);
      starts.push(task.id);
      for (const w of startWaiters) if (starts.length >= w.n) w.resolve();
    }));
    sdk.worker(mux, { queues: [queue], concurrency: 20 });
    await started(6);
    expect(await sdk.counts(queue)).toMatchObject({ active: 6, pending: 2 });
    const limits = await sdk.admin.listConcurrencyLimits({});
    expect(limits.limits.find((l) => l.queue === queue)).toMatchObject({ max: 2, inFlight: 4, held: 2 });
    expect(starts).toHaveLength(6);

    // Finishing a customer:1 task lets exactly its held sibling start.
    const tasks = await Promise.all(starts.map((id) => sdk.client.getTask(id)));
    const c1 = tasks.find((t) => t.concurrencyKey === "customer:1")!;
    running.get(c1.id)!();
    await started(7);
    expect((await sdk.client.getTask(starts[6]!)).concurrencyKey).toBe("customer:1");
    releaseAll = true;
    for (const resolve of running.values()) resolve();
    await eventually("all 8 tasks to complete", async () => ((await sdk.counts(queue)).completed === 8 ? true : undefined));
  });

  it("a limit of 1 is a mutex: tasks of a key never overlap", async () => {
    const queue = "mutex";
    await cli("concurrency", "set", queue, "--max", "1");
    await enqueueKeyed(queue, "resource:1", 15);
    await enqueueKeyed(queue, "resource:2", 15);
    const active: Record<string, number> = {};
    let worst = 0;
    const done = deferred();
    let finished = 0;
    sdk.worker(new Mux().handle("work", async (task) => {
      const key = task.concurrencyKey;
      active[key] = (active[key] ?? 0) + 1;
      worst = Math.max(worst, active[key]!);
      await new Promise((r) => setTimeout(r, 2)); // simulated work, not synchronisation
      active[key] -= 1;
      if (++finished === 30) done.resolve();
    }), { queues: [queue], concurrency: 10 });
    await done.promise;
    expect(worst).toBe(1);
  });

  it("control for the mutex: without a limit, the same workload runs tasks of one key side by side", async () => {
    // Shows the mutex test above can fail: the worker, its concurrency and the keys are
    // the same; only the limit is missing. Handlers hold until two of a key overlap.
    const queue = "mutex-control";
    await enqueueKeyed(queue, "resource:1", 15);
    await enqueueKeyed(queue, "resource:2", 15);
    const active: Record<string, number> = {};
    const overlapped = deferred();
    const done = deferred();
    let finished = 0;
    sdk.worker(new Mux().handle("work", async (task) => {
      const key = task.concurrencyKey;
      active[key] = (active[key] ?? 0) + 1;
      if (active[key] >= 2) overlapped.resolve();
      await overlapped.promise;
      active[key] -= 1;
      if (++finished === 30) done.resolve();
    }), { queues: [queue], concurrency: 10 });
    await overlapped.promise;
    await done.promise;
  });

  it("a saturated key never blocks other keys, even at a higher priority", async () => {
    const queue = "hol";
    await sdk.admin.setQueueConcurrencyLimit({ queue, max: 1 });
    await enqueueKeyed(queue, "hot", 5, { priority: 9 });
    await enqueueKeyed(queue, "cold", 2, { priority: 1 });
    const first = await leaseNow(queue, 3);
    expect(countByKey(first)).toEqual({ hot: 1, cold: 1 });
  });

  it("raising and lowering a limit take effect on the live queue at once", async () => {
    const queue = "live-limit";
    await sdk.admin.setQueueConcurrencyLimit({ queue, max: 1 });
    await enqueueKeyed(queue, "k", 6);
    const one = await leaseNow(queue);
    expect(one).toHaveLength(1);
    await cli("concurrency", "set", queue, "--max", "3");
    const two = await leaseNow(queue);
    expect(two).toHaveLength(2);
    // Lowering keeps the three running and holds new work until the key drains below 1.
    await cli("concurrency", "set", queue, "--max", "1");
    await settle(one[0]!, Outcome.SUCCESS);
    expect(await leaseNow(queue)).toHaveLength(0);
    await settle(two[0]!, Outcome.SUCCESS);
    expect(await leaseNow(queue)).toHaveLength(0);
    await settle(two[1]!, Outcome.SUCCESS);
    expect(await leaseNow(queue)).toHaveLength(1);
    // Clearing it makes the key unbounded.
    await cli("concurrency", "rm", queue);
    expect(await leaseNow(queue)).toHaveLength(2);
  });

  it("every exit path of an active task frees exactly one slot", async () => {
    await withShortLeases(async () => {
      const queue = "exit-paths";
      await sdk.admin.setQueueConcurrencyLimit({ queue, max: 1 });
      await enqueueKeyed(queue, "k", 8, { maxRetry: 5, backoff: { base: "1h" } });
      await enqueueKeyed(queue, "k", 1, { maxRetry: 0 });

      const exits: Array<[string, (d: Delivery) => Promise<void>]> = [
        ["success", (d) => settle(d, Outcome.SUCCESS)],
        ["retry", (d) => settle(d, Outcome.RETRY, "try later")],
        ["skip retry", (d) => settle(d, Outcome.SKIP_RETRY, "bad")],
        ["released", (d) => settle(d, Outcome.RELEASED)],
        ["operator cancel", async (d) => void (await sdk.client.cancelTask(d.tasks[0]!.id))],
        ["lease expiry", async (d) => void (await sdk.waitForState(d.tasks[0]!.id, "pending"))],
      ];
      let current = await leaseNow(queue);
      expect(current).toHaveLength(1);
      for (const [name, exit] of exits) {
        await exit(current[0]!);
        const next = await eventually(`a new dispatch after ${name}`, async () => {
          const got = await leaseNow(queue);
          return got.length > 0 ? got : undefined;
        });
        expect(next, `after ${name}`).toHaveLength(1);
        current = next;
      }
    });
  });

  it("a task dead-lettered by repeated lease expiry frees its slot at once", async () => {
    await withShortLeases(async () => {
      const queue = "reaped";
      await sdk.admin.setQueueConcurrencyLimit({ queue, max: 1 });
      const [doomed] = await enqueueKeyed(queue, "k", 1, { maxRetry: 0 });
      await enqueueKeyed(queue, "k", 1);
      const first = await leaseNow(queue);
      expect(first[0]!.tasks[0]!.id).toBe(doomed!.id);
      await sdk.waitForState(doomed!.id, "archived");
      const next = await leaseNow(queue);
      expect(next).toHaveLength(1);
      expect(next[0]!.tasks[0]!.id).not.toBe(doomed!.id);
    });
  });

  it("a re-leased task after lease expiry does not count twice (limit 1 cannot deadlock)", async () => {
    await withShortLeases(async () => {
      const queue = "no-double-count";
      await sdk.admin.setQueueConcurrencyLimit({ queue, max: 1 });
      const [task] = await enqueueKeyed(queue, "k", 1);
      expect(await leaseNow(queue)).toHaveLength(1);
      await sdk.waitForState(task!.id, "pending"); // the lease lapsed
      const again = await leaseNow(queue);
      expect(again).toHaveLength(1);
      await settle(again[0]!, Outcome.SUCCESS);
      expect((await sdk.client.getTask(task!.id)).state).toBe("completed");
    });
  });

  it("counts throttled dispatch cycles per queue", async () => {
    const metrics = await node.metrics();
    expect(metrics).toMatch(/conveyor_concurrency_throttled_total\{queue="reports"\} [1-9]/);
    expect(metrics).toMatch(/conveyor_concurrency_held\{queue="[a-z-]+"\}/);
    expect(metrics).not.toMatch(/customer:1/); // never a key as a label
  });

  it("--max below 1 and a bad queue name are INVALID_ARGUMENT and change nothing", async () => {
    await expect(sdk.admin.setQueueConcurrencyLimit({ queue: "reports", max: 0 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "max" });
    await expect(sdk.admin.setQueueConcurrencyLimit({ queue: "bad name", max: 2 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "queue" });
    const limits = await sdk.admin.listConcurrencyLimits({});
    expect(limits.limits.find((l) => l.queue === "reports")?.max).toBe(2);
    expect(limits.limits.some((l) => l.queue === "bad name")).toBe(false);
    const err = await cli("concurrency", "set", "reports", "--max", "0").catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 2 });
    expect((err as { stderr: string }).stderr).toContain("--max");
  });
});

describe("limits across a restart", () => {
  it("counts are rebuilt from durable active tasks: a restart never over-admits", async () => {
    let local = await NodeProcess.start({ settings: { lease_ttl: "30s" } });
    let s = connect(local);
    const queue = "restart-limit";
    try {
      await s.admin.setQueueConcurrencyLimit({ queue, max: 2 });
      for (let i = 0; i < 5; i++) await s.client.enqueue(newTask("work", json({ i })), { queue, concurrencyKey: "k" });
      const lease = (max: number) => s.workerRpc.lease({ workerId: "t", queues: [{ queue, weight: 1 }], maxDeliveries: max, waitMs: 0 });
      const held = (await lease(10)).deliveries;
      expect(held).toHaveLength(2);
      await local.kill();
      await s.close();
      local = await local.restart();
      s = connect(local);
      expect((await lease(10)).deliveries).toHaveLength(0);
      await s.workerRpc.settle({ workerId: "t", settlements: [{ queue, leaseId: held[0]!.leaseId, taskId: held[0]!.tasks[0]!.id, outcome: Outcome.SUCCESS }] });
      expect((await lease(10)).deliveries).toHaveLength(1);
      expect((await s.admin.listConcurrencyLimits({})).limits[0]).toMatchObject({ queue, max: 2, inFlight: 2 });
    } finally {
      await s.close();
      await local.stop();
      local.cleanup();
    }
  });
});
