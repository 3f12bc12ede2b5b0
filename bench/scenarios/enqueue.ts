/**
 * Enqueue throughput with no worker: 1 call in flight, 50 in flight (the client
 * coalesces them into EnqueueBatch calls) and explicit batches of 1,000; plus a unary
 * RPC round trip through the node (TaskService.GetTask of an existing id) and the
 * stack's floor (bench/floor.ts: a bare grpc-js call + a committed SQLite insert), with
 * the 1-in-flight rate as a fraction of the floor's (issue 15's goal: at least 0.8). Each
 * mode gets a fresh node, so every run starts from an empty SQLite file.
 */
import type { Client } from "../../src/index.js";
import { AdminClient, fmtCounts } from "../admin.js";
import { CpuMeter, fmtCpu } from "../cpu.js";
import type { Daemon } from "../daemon.js";
import { enqueueBatches, enqueueLanes } from "../producer.js";
import { target, type ResultRow, type Scenario, type ScenarioContext } from "../scenario.js";
import { fmtMs, fmtNum, summarize } from "../stats.js";
import { wallNow } from "../time.js";
import { warmUpProducer } from "../warmup.js";
import { measureFloor } from "../floor.js";

const QUEUE = "bench-enqueue";
const WARMUP_QUEUE = "bench-warmup";
const BASELINE_CALLS = 2_000;
const BATCH = 1_000;

export const enqueueScenario: Scenario = {
  name: "enqueue",
  description: "enqueue throughput: 1 in flight, 50 in flight, batches of 1,000; unary RPC baseline",
  async run(ctx) {
    const rows: ResultRow[] = [];

    // Baseline and 1-in-flight share a node: the baseline reads a task the warm-up stored.
    const d1 = await ctx.daemon({ label: "enqueue-1" });
    const c1 = ctx.client(d1);
    await warmUpProducer(c1, WARMUP_QUEUE);
    const baseline = await unaryBaseline(ctx, d1, c1);
    rows.push(baseline);
    const single = await measure(ctx, d1, "enqueue-1", (o) => enqueueLanes(c1, 1, o));
    const ratio = single.p50Ms! / baseline.p50Ms!;
    await ctx.release(d1);
    // The stack's floor for one write call, measured right after, in the same run (bench/floor.ts).
    const floor = await measureFloor(BASELINE_CALLS);
    ctx.progress(`floor (bare unary + SQLite insert): ${fmtNum(floor.tasksPerSec)} calls/s, p50 ${fmtMs(floor.p50Ms)} ms`, true);
    rows.push(floor);
    const ofFloor = single.tasksPerSec / floor.tasksPerSec;
    single.notes = `${single.notes}; p50 = ${ratio.toFixed(1)}x the unary RPC baseline; rate = ${ofFloor.toFixed(2)}x the floor's`;
    single.details = { ...single.details, latencyRatioToBaseline: ratio, rateRatioToFloor: ofFloor };
    single.targets = [target("x the floor's rate", ">=", 0.8, ofFloor, "x")];
    rows.push(single);

    const d50 = await ctx.daemon({ label: "enqueue-50" });
    const c50 = ctx.client(d50);
    await warmUpProducer(c50, WARMUP_QUEUE);
    const fifty = await measure(ctx, d50, "enqueue-50", (o) => enqueueLanes(c50, 50, o));
    fifty.targets = [target("tasks/s", ">=", 30_000, fifty.tasksPerSec, "tasks/s")];
    rows.push(fifty);
    await ctx.release(d50);

    const db = await ctx.daemon({ label: "enqueue-batch" });
    const cb = ctx.client(db);
    await warmUpProducer(cb, WARMUP_QUEUE);
    const batch = await measure(ctx, db, "enqueue-batch", (o) => enqueueBatches(cb, BATCH, o), "per call of 1,000");
    batch.targets = [target("tasks/s", ">=", 100_000, batch.tasksPerSec, "tasks/s")];
    rows.push(batch);
    await ctx.release(db);
    return rows;
  },
};

type Produce = (o: { queue: string; count: number; onProgress: (n: number) => void }) => Promise<number[]>;

async function measure(ctx: ScenarioContext, daemon: Daemon, name: string, produce: Produce, latencyUnit = "per call"): Promise<ResultRow> {
  const n = ctx.options.tasks;
  const cpu = new CpuMeter({ daemon: daemon.pid, producer: process.pid });
  const t0 = wallNow();
  const latencies = await produce({ queue: QUEUE, count: n, onProgress: (k) => ctx.progress(`${name}: ${k}/${n} enqueued`) });
  const seconds = (wallNow() - t0) / 1000;
  const usage = cpu.reading(n);
  const lat = summarize(latencies);
  const admin = ctx.admin(daemon);
  const counts = await admin.counts(QUEUE);
  const check = counts.pending === n ? `pending=${n} ok` : `COUNT MISMATCH: ${fmtCounts(counts)}, expected pending=${n}`;
  ctx.progress(`${name}: ${fmtNum(n / seconds)} tasks/s`, true);
  return {
    scenario: name, tasks: n, seconds, tasksPerSec: n / seconds, p50Ms: lat.p50, p99Ms: lat.p99,
    notes: `latency ${latencyUnit}; ${check}; cpu ${fmtCpu(usage)}`,
    details: { latencyMs: lat, cpuPercent: usage.percent, cpuUsPerTask: usage.usPerTask, counts },
  };
}

async function unaryBaseline(ctx: ScenarioContext, daemon: Daemon, client: Client): Promise<ResultRow> {
  const { id } = await client.enqueue({ type: "bench:baseline", payload: { bytes: new Uint8Array(110), contentType: "application/octet-stream" } }, { queue: WARMUP_QUEUE });
  const admin: AdminClient = ctx.admin(daemon);
  for (let i = 0; i < 200; i++) await admin.tasks.getTask({ id });
  const cpu = new CpuMeter({ daemon: daemon.pid, producer: process.pid });
  const latencies: number[] = [];
  const t0 = wallNow();
  for (let i = 0; i < BASELINE_CALLS; i++) {
    const t = wallNow();
    await admin.tasks.getTask({ id }, { timeoutMs: 10_000 });
    latencies.push(wallNow() - t);
  }
  const seconds = (wallNow() - t0) / 1000;
  const usage = cpu.reading(BASELINE_CALLS);
  const lat = summarize(latencies);
  ctx.progress(`unary RPC baseline: ${fmtNum(BASELINE_CALLS / seconds)} calls/s, p50 ${fmtMs(lat.p50)} ms`, true);
  return {
    scenario: "unary RPC baseline (1 in flight)", tasks: BASELINE_CALLS, seconds, tasksPerSec: BASELINE_CALLS / seconds,
    p50Ms: lat.p50, p99Ms: lat.p99,
    notes: `TaskService.GetTask of an existing id, sequential; calls/s; cpu ${fmtCpu(usage)}`,
    details: { latencyMs: lat, cpuPercent: usage.percent, cpuUsPerTask: usage.usPerTask },
  };
}
