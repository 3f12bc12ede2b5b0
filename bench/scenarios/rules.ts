/**
 * Cost of concurrency strategies: end-to-end throughput (as in e2e-batch: a worker
 * process of concurrency 50 with a no-op handler idles on the queue, N tasks are
 * enqueued in batches of 1,000, the clock runs from the first enqueue call to the Nth
 * completion) of N tasks over 1,000 accounts, once with no rule and once with one
 * GROUP_ROUND_ROBIN rule (max 5 per account) keyed by the CEL expression
 * `input.account`, declared by the worker (`mux.handle(type, fn, { concurrency })`,
 * registered before anything is enqueued). Each run gets a fresh node. The two
 * variants run twice in A B B A order (the machine is shared: drift hits both) and each
 * keeps its best run; the ratio rule/no-rule of the best runs is the figure.
 */
import type { ConcurrencyRuleSpec } from "../../src/index.js";
import { json, newTask } from "../../src/index.js";
import { fmtCounts } from "../admin.js";
import { CpuMeter, fmtCpu, ioOf } from "../cpu.js";
import { payloadOf, shuffledKeys } from "../payload.js";
import { enqueueBatches } from "../producer.js";
import { TASK_TYPE } from "../protocol.js";
import { target, type ResultRow, type Scenario, type ScenarioContext } from "../scenario.js";
import { fmtNum, summarize } from "../stats.js";
import { monotonicUs, until, wallNow } from "../time.js";
import { warmUpWorker } from "../warmup.js";

const QUEUE = "bench-rules";
const ACCOUNTS = 1_000;
const CONCURRENCY = 50;
const BATCH = 1_000;
const WARMUP = 1_000;
const STALL_MS = 15_000;
const TARGET_RATIO = 0.8;
const RULE: ConcurrencyRuleSpec = { expression: "input.account", maxRuns: 5, limitStrategy: "GROUP_ROUND_ROBIN" };

type Variant = "rules-none" | "rules-rr";
const ORDER: Variant[] = ["rules-none", "rules-rr", "rules-rr", "rules-none"];

export const rulesScenario: Scenario = {
  name: "rules",
  description: "strategies: e2e throughput over 1,000 accounts with a GROUP_ROUND_ROBIN rule (input.account, max 5) vs no rule",
  async run(ctx) {
    const runs: Record<Variant, ResultRow[]> = { "rules-none": [], "rules-rr": [] };
    for (const [i, variant] of ORDER.entries()) {
      ctx.progress(`rules: run ${i + 1}/${ORDER.length}: ${variant}`, true);
      runs[variant].push(await run(ctx, variant));
    }
    const best = (rows: ResultRow[]) => rows.reduce((a, b) => (b.tasksPerSec > a.tasksPerSec ? b : a));
    const none = best(runs["rules-none"]);
    const rr = best(runs["rules-rr"]);
    const ratio = rr.tasksPerSec / none.tasksPerSec;
    const all = (v: Variant) => runs[v].map((r) => fmtNum(r.tasksPerSec)).join(", ");
    none.notes = `best of ${runs["rules-none"].length} (${all("rules-none")} tasks/s); ${none.notes}`;
    rr.notes = `best of ${runs["rules-rr"].length} (${all("rules-rr")} tasks/s); ratio to no rule ${ratio.toFixed(2)}; ${rr.notes}`;
    none.details = { ...none.details, runsTasksPerSec: runs["rules-none"].map((r) => r.tasksPerSec) };
    rr.details = {
      ...rr.details, runsTasksPerSec: runs["rules-rr"].map((r) => r.tasksPerSec), ratioToNoRule: ratio,
      runs: ORDER.map((v, i) => {
        const r = runs[v][ORDER.slice(0, i).filter((x) => x === v).length]!;
        const d = r.details ?? {};
        return { variant: v, order: i + 1, tasksPerSec: r.tasksPerSec, profileWindowUs: d.profileWindowUs, daemonPid: d.daemonPid, workerPid: d.workerPid };
      }),
    };
    rr.targets = [target("throughput ratio rule / no rule", ">=", TARGET_RATIO, ratio, "x")];
    return [none, rr];
  },
};

const accountTask = (accountOf: readonly number[]) => (i: number) =>
  newTask(TASK_TYPE, json({ ...payloadOf(i), account: `acct-${String(accountOf[i % accountOf.length]!).padStart(4, "0")}` }));

async function run(ctx: ScenarioContext, variant: Variant): Promise<ResultRow> {
  const n = ctx.options.tasks;
  const daemon = await ctx.daemon({ label: variant });
  const worker = await ctx.worker(daemon, {
    queue: QUEUE, concurrency: CONCURRENCY, sleepMs: 0, record: false, ...(variant === "rules-rr" ? { rules: [RULE] } : {}),
  });
  const client = ctx.client(daemon);
  const admin = ctx.admin(daemon);
  const strategies = (await admin.admin.listStrategies({})).types;
  const declared = strategies.find((t) => t.type === TASK_TYPE)?.rules.length ?? 0;
  if (declared !== (variant === "rules-rr" ? 1 : 0)) throw new Error(`${variant}: ${declared} rules registered for ${TASK_TYPE}`);
  const accountOf = shuffledKeys(n, ACCOUNTS, 42);
  const task = accountTask(accountOf);
  await warmUpWorker(client, daemon, worker, QUEUE, WARMUP, task);
  await until("warm-up tasks to be completed", async () => ((await admin.counts(QUEUE)).completed === WARMUP ? true : undefined), 10_000, 20);

  worker.measure(n);
  let enqueued = 0;
  let completed = 0;
  const show = () => ctx.progress(`${variant}: ${enqueued}/${n} enqueued, ${completed}/${n} completed`);
  const done = worker.waitDone({
    stallMs: STALL_MS,
    onProgress: (p) => {
      completed = p.completed;
      show();
    },
    describeStall: async () => `node counts: ${fmtCounts(await admin.counts(QUEUE))}`,
  });
  done.catch(() => {});
  const commitsBefore = await daemon.metric("conveyor_sqlite_commits_total");
  const cpu = new CpuMeter({ daemon: daemon.pid, worker: worker.pid, producer: process.pid });
  const ioBefore = ioOf(daemon.pid);
  const monoStart = monotonicUs();
  const t0 = wallNow();
  const latencies = await enqueueBatches(client, BATCH, {
    queue: QUEUE, count: n, task,
    onProgress: (k) => {
      enqueued = k;
      show();
    },
  });
  const enqueueSeconds = (wallNow() - t0) / 1000;
  enqueued = n;
  const finished = await done;
  const usage = cpu.reading(n);
  const profileWindowUs = [monoStart, monotonicUs()];
  const ioAfter = ioOf(daemon.pid);
  const daemonWrites = ioBefore && ioAfter
    ? { wcharPerTask: (ioAfter.wchar - ioBefore.wchar) / n, storageBytesPerTask: (ioAfter.writeBytes - ioBefore.writeBytes) / n }
    : undefined;
  const seconds = (finished.at - t0) / 1000;
  ctx.progress(`${variant}: ${n}/${n} completed: ${fmtNum(n / seconds)} tasks/s`, true);

  const counts = await until(`completed = ${WARMUP + n}`, async () => {
    const c = await admin.counts(QUEUE);
    return c.completed >= WARMUP + n ? c : undefined;
  }, 10_000, 20).catch(() => admin.counts(QUEUE));
  const commits = (await daemon.metric("conveyor_sqlite_commits_total")) - commitsBefore;
  const cancelled = await daemon.metric("conveyor_tasks_cancelled_total");
  const completedDelta = counts.completed - WARMUP;
  const check = completedDelta === n && counts.archived === 0 && counts.cancelled === 0
    ? `ListQueues completed=${n} ok`
    : `COUNT MISMATCH: completed=${completedDelta} (${fmtCounts(counts)}), expected ${n}`;
  const report = await worker.report();
  const errors = report.errors.count > 0 ? `; worker errors ${report.errors.count}: ${report.errors.samples.join(" | ")}` : "";
  await ctx.release(daemon);
  return {
    scenario: variant, tasks: n, seconds, tasksPerSec: n / seconds,
    notes: `${variant === "rules-rr" ? "GROUP_ROUND_ROBIN input.account max 5" : "no rule"}, ${ACCOUNTS} accounts; ` +
      `enqueue phase ${enqueueSeconds.toFixed(2)} s (${fmtNum(n / enqueueSeconds)}/s); ${check}; ` +
      `~${(n / Math.max(1, report.startClusters)).toFixed(0)} deliveries/Lease answer; ${fmtNum(commits / (n / 1000))} commits/1k; ` +
      `daemon wrote ${fmtNum(daemonWrites?.wcharPerTask)} B/task; cpu ${fmtCpu(usage)}${errors}`,
    details: {
      variant, accounts: ACCOUNTS, rule: variant === "rules-rr" ? RULE : undefined, enqueueSeconds,
      enqueueCallMs: summarize(latencies), cpuPercent: usage.percent, cpuUsPerTask: usage.usPerTask, counts, cancelledByStrategy: cancelled,
      sqliteCommits: commits, daemonWrites, workerErrors: report.errors, profileWindowUs, daemonPid: daemon.pid, workerPid: worker.pid, leaseResponsesApprox: report.startClusters,
    },
  };
}
