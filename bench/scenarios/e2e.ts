/**
 * End-to-end throughput: a worker process (concurrency 50, no-op handler) idles on the
 * queue; N tasks are enqueued (single calls with 50 in flight, or batches of 1,000) and
 * the clock runs from the first enqueue call to the worker's Nth handler completion.
 * AdminService.ListQueues then confirms that exactly N more tasks are completed.
 */
import { fmtCounts } from "../admin.js";
import { CpuMeter, fmtCpu } from "../cpu.js";
import { enqueueBatches, enqueueLanes } from "../producer.js";
import { target, type ResultRow, type Scenario, type ScenarioContext } from "../scenario.js";
import { fmtNum, summarize } from "../stats.js";
import { until, wallNow } from "../time.js";
import { warmUpWorker } from "../warmup.js";

const QUEUE = "bench-e2e";
const CONCURRENCY = 50;
const WARMUP = 1_000;
const STALL_MS = 15_000;
const COMMITS = "conveyor_sqlite_commits_total";

export const e2eScenario: Scenario = {
  name: "e2e",
  description: "end-to-end throughput, worker concurrency 50: single enqueue (50 in flight) and batches of 1,000",
  async run(ctx) {
    const single = await run(ctx, "e2e-single");
    single.targets = [target("tasks/s", ">=", 9_000, single.tasksPerSec, "tasks/s")];
    const batch = await run(ctx, "e2e-batch");
    batch.targets = [target("tasks/s", ">=", 25_000, batch.tasksPerSec, "tasks/s")];
    return [single, batch];
  },
};

async function run(ctx: ScenarioContext, name: "e2e-single" | "e2e-batch"): Promise<ResultRow> {
  const n = ctx.options.tasks;
  const daemon = await ctx.daemon({ label: name });
  const worker = await ctx.worker(daemon, { queue: QUEUE, concurrency: CONCURRENCY, sleepMs: 0, record: false });
  const client = ctx.client(daemon);
  const admin = ctx.admin(daemon);
  await warmUpWorker(client, daemon, worker, QUEUE, WARMUP);
  await until("warm-up tasks to be completed", async () => ((await admin.counts(QUEUE)).completed === WARMUP ? true : undefined), 10_000, 20);

  worker.measure(n);
  let enqueued = 0;
  let completed = 0;
  const show = () => ctx.progress(`${name}: ${enqueued}/${n} enqueued, ${completed}/${n} completed`);
  const done = worker.waitDone({
    stallMs: STALL_MS,
    onProgress: (p) => {
      completed = p.completed;
      show();
    },
    describeStall: async () => `node counts: ${fmtCounts(await admin.counts(QUEUE))}; health: ${JSON.stringify(await daemon.health())}`,
  });
  done.catch(() => {}); // awaited below; do not let an early failure go unhandled while enqueueing

  const commitsBefore = await daemon.metric(COMMITS);
  const cpu = new CpuMeter({ daemon: daemon.pid, worker: worker.pid, producer: process.pid });
  const t0 = wallNow();
  const onProgress = (k: number) => {
    enqueued = k;
    show();
  };
  const latencies = name === "e2e-single"
    ? await enqueueLanes(client, 50, { queue: QUEUE, count: n, onProgress })
    : await enqueueBatches(client, 1_000, { queue: QUEUE, count: n, onProgress });
  const enqueueSeconds = (wallNow() - t0) / 1000;
  enqueued = n;
  const finished = await done;
  const usage = cpu.reading(n);
  const seconds = (finished.at - t0) / 1000;
  ctx.progress(`${name}: ${n}/${n} completed: ${fmtNum(n / seconds)} tasks/s`, true);

  // Durable check: the last settles may still be committing when the handler reports.
  let counts = await admin.counts(QUEUE);
  try {
    counts = await until(`completed = ${WARMUP + n}`, async () => {
      const c = await admin.counts(QUEUE);
      return c.completed >= WARMUP + n ? c : undefined;
    }, 10_000, 20);
  } catch {
    counts = await admin.counts(QUEUE);
  }
  const commits = (await daemon.metric(COMMITS)) - commitsBefore;
  const completedDelta = counts.completed - WARMUP;
  const check = completedDelta === n ? `ListQueues completed=${n} ok` : `COUNT MISMATCH: completed=${completedDelta} (${fmtCounts(counts)}), expected ${n}`;
  const report = await worker.report();
  const lat = summarize(latencies);
  const perLease = n / Math.max(1, report.startClusters);
  const errors = report.errors.count > 0 ? `; worker errors ${report.errors.count}: ${report.errors.samples.join(" | ")}` : "";
  return {
    scenario: name, tasks: n, seconds, tasksPerSec: n / seconds,
    notes: `enqueue phase ${enqueueSeconds.toFixed(2)} s (${fmtNum(n / enqueueSeconds)}/s); ${check}; ` +
      `~${perLease.toFixed(0)} deliveries/Lease answer; ${fmtNum(commits / (n / 1000))} commits/1k tasks; cpu ${fmtCpu(usage)}${errors}`,
    details: {
      enqueueSeconds, enqueueLatencyMs: lat, firstHandlerAfterMs: finished.firstStartAt - t0,
      cpuPercent: usage.percent, cpuUsPerTask: usage.usPerTask, counts, workerErrors: report.errors, sqliteCommits: commits,
      leaseResponsesApprox: report.startClusters, deliveriesPerLeaseApprox: perLease,
    },
  };
}
