/**
 * Group aggregation through a real node: batches delivered to batch handlers, fire
 * triggers (at max size at once, at max delay and grace on time: the node runs with its
 * default settings, so a fire that waited for a periodic sweep would be late), overrides
 * set with the CLI, per-member outcomes, crash redelivery, capability gating and restart.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchError, Mux, json, newTask, skipRetry, type TaskView } from "../../src/index.js";
import { GroupState } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { NodeProcess, REPO_ROOT, eventually } from "../support/node-process.js";
import { connect, runCli } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;
const cli = (...args: string[]) => runCli(node, ...args);

beforeAll(async () => {
  node = await NodeProcess.start({ settings: { lease_ttl: "1s" } });
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

/** A batch handler that records each call and lets the test await the n-th one. */
function batchRecorder(type: string, onBatch: (tasks: TaskView[]) => void | Promise<void> = () => {}) {
  const calls: Array<{ atMs: number; tasks: TaskView[] }> = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const mux = new Mux().handleBatch(type, async (tasks) => {
    calls.push({ atMs: Date.now(), tasks });
    for (const w of waiters) if (calls.length >= w.n) w.resolve();
    await onBatch(tasks);
  });
  const calledTimes = (n: number) => new Promise<void>((resolve) => {
    if (calls.length >= n) resolve();
    else waiters.push({ n, resolve });
  });
  return { mux, calls, calledTimes };
}

async function enqueueGroup(queue: string, group: string, n: number, type = "digest", start = 0) {
  const res = await sdk.client.enqueueBatch(Array.from({ length: n }, (_, i) => ({ task: newTask(type, json({ n: start + i })), options: { queue, group } })));
  return res.map((r) => {
    if (r instanceof Error) throw r;
    return r;
  });
}

const slow = ["--max-delay", "1h", "--grace", "1h"];
/**
 * How late a time-triggered fire may reach a handler: the node's timer, one Lease answer
 * and the SDK, on a loaded 2-core machine. A fire that waits for a 1 s sweep misses it.
 */
const LATE_MAX_MS = 250;

/** A worker whose parked Lease call is already waiting, so a fire reaches it at once. */
async function readyWorker(mux: Mux, queue: string) {
  const worker = sdk.worker(mux, { queues: [queue] });
  await worker.registered;
  return worker;
}

describe("group aggregation", () => {
  it("members land aggregating, counted per queue, until the group fires", async () => {
    const queue = "agg-count";
    await cli("group", "set", queue, "--group", "g", "--max-size", "10", ...slow);
    const [first] = await enqueueGroup(queue, "g", 3);
    expect(first!.state).toBe("aggregating");
    expect((await sdk.counts(queue)).aggregating).toBe(3);
    const live = await sdk.admin.listGroups({ queue });
    expect(live.groups).toHaveLength(1);
    expect(live.groups[0]).toMatchObject({ group: "g", type: "digest", size: 3, state: GroupState.AGGREGATING, workerAvailable: false });
  });

  it("fires at max size, one call with all members; a capped fire leaves the rest aggregating", async () => {
    const queue = "agg-size";
    await cli("group", "set", queue, "--group", "g", "--max-size", "5", ...slow);
    const rec = batchRecorder("digest");
    sdk.worker(rec.mux, { queues: [queue] });
    await enqueueGroup(queue, "g", 7);
    await rec.calledTimes(1);
    expect(rec.calls[0]!.tasks.map((t) => t.json<{ n: number }>().n)).toEqual([0, 1, 2, 3, 4]);
    expect((await sdk.admin.listGroups({ queue })).groups[0]).toMatchObject({ size: 2, state: GroupState.AGGREGATING });
    await enqueueGroup(queue, "g", 3, "digest", 7);
    await rec.calledTimes(2);
    expect(rec.calls[1]!.tasks.map((t) => t.json<{ n: number }>().n)).toEqual([5, 6, 7, 8, 9]);
  });

  it("fires at max delay after the first member", async () => {
    const queue = "agg-delay";
    await cli("group", "set", queue, "--group", "g", "--max-size", "100", "--max-delay", "300ms", "--grace", "1h");
    const rec = batchRecorder("digest");
    await readyWorker(rec.mux, queue);
    const [first] = await enqueueGroup(queue, "g", 3);
    const created = (await sdk.client.getTask(first!.id)).createdAt!.getTime();
    await rec.calledTimes(1);
    expect(rec.calls[0]!.tasks).toHaveLength(3);
    expect(rec.calls[0]!.atMs - created).toBeGreaterThanOrEqual(300);
    expect(rec.calls[0]!.atMs - created).toBeLessThan(300 + LATE_MAX_MS);
  });

  it("grace debounces: each member resets it, and the group fires after the last one", async () => {
    const queue = "agg-grace";
    const graceMs = 2_000;
    await cli("group", "set", queue, "--group", "g", "--max-size", "100", "--max-delay", "1h", "--grace", `${graceMs}ms`);
    const rec = batchRecorder("digest");
    await readyWorker(rec.mux, queue);
    const ids: string[] = [];
    // No sleeps: the node's own view shows that every arrival moves the fire time to
    // "last arrival + grace" (the only assumption: three enqueues take less than the grace).
    for (let i = 0; i < 3; i++) {
      ids.push((await enqueueGroup(queue, "g", 1, "digest", i))[0]!.id);
      const arrivedAtMs = (await sdk.client.getTask(ids[i]!)).createdAt!.getTime();
      const [live] = (await sdk.admin.listGroups({ queue })).groups;
      expect(live).toMatchObject({ group: "g", size: i + 1, state: GroupState.AGGREGATING });
      expect(Number(live!.lastMemberAtMs)).toBe(arrivedAtMs);
      expect(Number(live!.nextFireAtMs)).toBeGreaterThanOrEqual(arrivedAtMs + graceMs);
    }
    await rec.calledTimes(1);
    expect(rec.calls[0]!.tasks.map((t) => t.id)).toEqual(ids);
    const last = (await sdk.client.getTask(ids[2]!)).createdAt!.getTime();
    expect(rec.calls[0]!.atMs - last).toBeGreaterThanOrEqual(graceMs);
    expect(rec.calls[0]!.atMs - last).toBeLessThan(graceMs + LATE_MAX_MS);
  });

  it("resolves thresholds group → queue default → server default, and applies changes live", async () => {
    const queue = "agg-resolve";
    await cli("group", "set", queue, "--max-size", "3", ...slow);
    await cli("group", "set", queue, "--group", "special", "--max-size", "2", ...slow);
    const rec = batchRecorder("digest");
    sdk.worker(rec.mux, { queues: [queue] });
    await enqueueGroup(queue, "special", 2);
    await rec.calledTimes(1);
    expect(rec.calls[0]!.tasks).toHaveLength(2);
    await enqueueGroup(queue, "other", 3);
    await rec.calledTimes(2);
    expect(rec.calls[1]!.tasks).toHaveLength(3);

    await cli("group", "rm", queue);
    await enqueueGroup(queue, "third", 3);
    const live = (await sdk.admin.listGroups({ queue })).groups.find((g) => g.group === "third")!;
    expect(live.config).toMatchObject({ maxSize: 100, maxDelayMs: 60_000n, graceMs: 10_000n }); // the server default
    await cli("group", "set", queue, "--group", "third", "--max-size", "3", ...slow);
    await rec.calledTimes(3);
    expect(rec.calls[2]!.tasks).toHaveLength(3);
    const listed = await cli("group", "ls", queue);
    expect(listed.stdout).toContain("special");
    expect(listed.stdout).toContain("(server)");
  });

  it("BatchError gives members their own outcome; a retried member comes back alone", async () => {
    const queue = "agg-batch-error";
    await cli("group", "set", queue, "--group", "g", "--max-size", "3", ...slow);
    const rec = batchRecorder("digest", (tasks) => {
      if (tasks.length === 3) {
        throw new BatchError({ [tasks[0]!.id]: skipRetry(new Error("bad payload")), [tasks[1]!.id]: new Error("flaky") });
      }
    });
    sdk.worker(rec.mux, { queues: [queue] });
    const members = await enqueueGroup(queue, "g", 3);
    await rec.calledTimes(2);
    expect(rec.calls[1]!.tasks.map((t) => t.id)).toEqual([members[1]!.id]); // a batch of one
    const [a, b, c] = members.map((m) => m.id);
    expect(await sdk.waitForState(a!, "archived")).toMatchObject({ lastError: "bad payload" });
    expect(await sdk.waitForState(b!, "completed")).toMatchObject({ retried: 1, lastError: "flaky" });
    await sdk.waitForState(c!, "completed");
  }, 20_000);

  it("a batch whose worker is killed with -9 is redelivered whole", async () => {
    const queue = "agg-crash";
    await cli("group", "set", queue, "--group", "g", "--max-size", "4", ...slow);
    const members = await enqueueGroup(queue, "g", 4, "hang");
    const crashing = spawn(process.execPath, [join(REPO_ROOT, "test/support/crash-worker.mjs"), node.grpcAddress, queue, "batch"], { stdio: ["ignore", "pipe", "inherit"] });
    const started = await new Promise<string[]>((resolve) => {
      createInterface({ input: crashing.stdout! }).on("line", (line) => {
        if (line.startsWith("started ")) resolve(line.slice(8).split(" "));
      });
    });
    expect(started).toEqual(members.map((m) => m.id));
    crashing.kill("SIGKILL");
    const rec = batchRecorder("hang");
    sdk.worker(rec.mux, { queues: [queue] });
    await rec.calledTimes(1);
    expect(rec.calls[0]!.tasks.map((t) => t.id)).toEqual(started);
    expect(rec.calls[0]!.tasks.every((t) => t.retried === 1)).toBe(true);
  });

  it("only a worker with a batch handler receives batches; plain tasks are unaffected", async () => {
    const queue = "agg-caps";
    await cli("group", "set", queue, "--group", "g", "--max-size", "2", ...slow);
    const plainSeen: string[] = [];
    let plainDone!: () => void;
    const plainFinished = new Promise<void>((r) => (plainDone = r));
    sdk.worker(new Mux().handle("digest", async (t) => {
      plainSeen.push(t.id);
      plainDone();
    }), { queues: [queue], workerId: "plain-only" });
    const grouped = await enqueueGroup(queue, "g", 2);
    const single = await sdk.client.enqueue(newTask("digest", json({ single: true })), { queue });
    await plainFinished;
    expect(plainSeen).toEqual([single.id]);
    const waiting = await eventually("the fired batch to wait for a capable worker", async () => {
      const g = (await sdk.admin.listGroups({ queue })).groups.find((x) => x.state === GroupState.READY);
      return g;
    });
    expect(waiting).toMatchObject({ size: 2, workerAvailable: false });
    expect((await cli("group", "ls", "--live", queue)).stdout).toContain("NONE");
    const rec = batchRecorder("digest");
    sdk.worker(rec.mux, { queues: [queue] });
    await rec.calledTimes(1);
    expect(rec.calls[0]!.tasks.map((t) => t.id)).toEqual(grouped.map((g) => g.id));
    expect(plainSeen).toEqual([single.id]);
  });

  it("bad group input is INVALID_ARGUMENT naming the conflict, and nothing is stored", async () => {
    const queue = "agg-bad";
    await enqueueGroup(queue, "g", 1, "digest");
    const before = await sdk.counts(queue);
    await expect(sdk.client.enqueue(newTask("other-type", json({})), { queue, group: "g" }))
      .rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "task.type" });
    await expect(sdk.client.enqueue(newTask("digest", json({})), { queue, group: "g", processIn: "1m" }))
      .rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "task.group" });
    expect(await sdk.counts(queue)).toEqual(before);
    await expect(sdk.admin.setGroupConfig({ config: { queue, group: "g", maxSize: 0, maxDelayMs: 1000n, graceMs: 1000n } }))
      .rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "config.max_size" });
    await expect(sdk.admin.setGroupConfig({ config: { queue, group: "g", maxSize: 5, maxDelayMs: 0n, graceMs: 1000n } }))
      .rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "config.max_delay_ms" });
    expect((await sdk.admin.listGroupConfigs({ queue })).configs).toEqual([]);
  });
});

describe("a bench-sized load", () => {
  // Its own node at the default lease TTL: 100 batches at once on a loaded machine must
  // not lapse a lease (a redelivery is a handler call too).
  let big: NodeProcess;
  let bigSdk: ReturnType<typeof connect>;
  beforeAll(async () => {
    big = await NodeProcess.start();
    bigSdk = connect(big);
  });
  afterAll(async () => {
    await bigSdk.close();
    await big.stop();
    big.cleanup();
  });

  it("10k events into 100 groups of max size 100 reach the handler in exactly 100 calls, one whole group each", async () => {
    const queue = "agg-10k";
    await runCli(big, "group", "set", queue, "--max-size", "100", ...slow);
    const rec = batchRecorder("digest");
    await (bigSdk.worker(rec.mux, { queues: [queue], concurrency: 50 })).registered;
    // Every group's events spread over the whole run, as in the peer bench (seeded order).
    let seed = 42;
    const groups = Array.from({ length: 10_000 }, (_, i) => i % 100);
    for (let i = groups.length - 1; i > 0; i--) {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      const j = seed % (i + 1);
      [groups[i], groups[j]] = [groups[j]!, groups[i]!];
    }
    for (let at = 0; at < groups.length; at += 1_000) {
      const items = groups.slice(at, at + 1_000).map((g, k) => ({ task: newTask("digest", json({ n: at + k })), options: { queue, group: `g${g}` } }));
      for (const r of await bigSdk.client.enqueueBatch(items)) if (r instanceof Error) throw r;
    }
    await rec.calledTimes(100);
    expect((await bigSdk.counts(queue)).aggregating).toBe(0);
    expect(rec.calls).toHaveLength(100);
    const seen = new Set<number>();
    for (const call of rec.calls) {
      expect(call.tasks).toHaveLength(100);
      const group = new Set(call.tasks.map((t) => groups[t.json<{ n: number }>().n]));
      expect(group.size).toBe(1);
      seen.add([...group][0]!);
    }
    expect(seen.size).toBe(100);
  }, 60_000);
});

describe("groups across a restart", () => {
  it("aggregating members survive kill -9 and the group still fires", async () => {
    let local = await NodeProcess.start();
    let s = connect(local);
    const queue = "agg-restart";
    try {
      await s.admin.setGroupConfig({ config: { queue, group: "g", maxSize: 100, maxDelayMs: 3_600_000n, graceMs: 3_600_000n } });
      await s.client.enqueueBatch(Array.from({ length: 3 }, (_, i) => ({ task: newTask("digest", json({ i })), options: { queue, group: "g" } })));
      await local.kill();
      await s.close();
      local = await local.restart();
      s = connect(local);
      expect((await s.counts(queue)).aggregating).toBe(3);
      const got = new Promise<TaskView[]>((resolve) => s.worker(new Mux().handleBatch("digest", (tasks) => resolve(tasks)), { queues: [queue] }));
      await s.admin.setGroupConfig({ config: { queue, group: "g", maxSize: 3, maxDelayMs: 3_600_000n, graceMs: 3_600_000n } });
      expect((await got).map((t) => t.json<{ i: number }>().i)).toEqual([0, 1, 2]);
    } finally {
      await s.close();
      await local.stop();
      local.cleanup();
    }
  });
});
