/**
 * Per-key concurrency limits: 10,000 tasks over 100 concurrency keys (100 each, in a
 * seeded shuffled order), each handler sleeping 5 ms, a worker process of concurrency
 * 50, a queue limit of 2 per key (SetQueueConcurrencyLimit), then the same with 1.
 * Everything is enqueued first (batches of 1,000), then the worker starts; the clock
 * runs from its start (the worker process's `Worker.start()`) to the last completion.
 *
 * Ideal: the worker's 50 slots are the bound, 10,000 × 5 ms / 50 = 1,000 ms, for both
 * limits (100 keys × 1 ≥ 50 slots). The per-key overlap is computed from the handler
 * start/end timestamps the worker records: a violation is a key with more handlers
 * running at once than its limit. Each limit gets a fresh node, warmed up on another
 * queue (same limit and keys) by a worker process that is stopped before the measurement.
 * A third run without a queue limit (same tasks and keys) is the control: it tells the
 * cost of the limits from what the engine and machine allow with no limit at all.
 */
import { fmtCounts } from "../admin.js";
import { CpuMeter, fmtCpu, ioOf } from "../cpu.js";
import type { Daemon } from "../daemon.js";
import { shuffledKeys } from "../payload.js";
import { enqueueBatches } from "../producer.js";
import { target, type ResultRow, type Scenario, type ScenarioContext } from "../scenario.js";
import { fmtMs, fmtNum, maxOverlap, summarize } from "../stats.js";
import { monotonicUs, until, wallNow } from "../time.js";
import { waitParked } from "../warmup.js";

const QUEUE = "bench-keys";
const WARMUP_QUEUE = "bench-keys-warmup";
const TASKS = 10_000;
const KEYS = 100;
const SLEEP_MS = 5;
const CONCURRENCY = 50;
/** undefined: the control, no queue limit. */
const LIMITS: ReadonlyArray<number | undefined> = [2, 1, undefined];
const WARMUP = 1_000;
const BATCH = 1_000;
const STALL_MS = 15_000;
/** The 50 slots are the bound: 10,000 × 5 ms / 50. */
const IDEAL_MS = (TASKS * SLEEP_MS) / CONCURRENCY;
/** Within this factor of ideal. */
const TARGET_RATIO = 1.25;

export const keysScenario: Scenario = {
  name: "keys",
  description: "per-key limits: 10,000 tasks (5 ms) over 100 keys, worker concurrency 50, limit 2, 1 and none per key",
  async run(ctx) {
    const rows: ResultRow[] = [];
    for (const limit of LIMITS) rows.push(await run(ctx, limit));
    const control = rows.find((r) => r.scenario === "keys-no-limit");
    if (control) {
      for (const r of rows) {
        if (r === control) continue;
        const vs = r.seconds / control.seconds;
        r.notes = `${vs.toFixed(2)}x the no-limit run; ${r.notes}`;
        r.details = { ...r.details, ratioToNoLimit: vs };
      }
    }
    return rows;
  },
};

const keyName = (k: number) => `key-${String(k).padStart(3, "0")}`;

async function run(ctx: ScenarioContext, limit: number | undefined): Promise<ResultRow> {
  const name = limit === undefined ? "keys-no-limit" : `keys-limit-${limit}`;
  const daemon = await ctx.daemon({ label: name });
  const client = ctx.client(daemon);
  const admin = ctx.admin(daemon);
  await warmUp(ctx, daemon, limit);

  if (limit !== undefined) await admin.admin.setQueueConcurrencyLimit({ queue: QUEUE, max: limit });
  const keyOf = shuffledKeys(TASKS, KEYS, 42);
  const t0 = wallNow();
  await enqueueBatches(client, BATCH, {
    queue: QUEUE, count: TASKS, options: (i) => ({ concurrencyKey: keyName(keyOf[i]!) }),
    onProgress: (k) => ctx.progress(`${name}: ${k}/${TASKS} enqueued`),
  });
  const enqueueSeconds = (wallNow() - t0) / 1000;
  const before = await admin.counts(QUEUE);
  if (before.pending !== TASKS) throw new Error(`${name}: expected ${TASKS} pending before the worker starts, got ${fmtCounts(before)}`);
  ctx.progress(`${name}: ${TASKS} enqueued in ${enqueueSeconds.toFixed(2)} s; starting the worker`, true);

  const commitsBefore = await daemon.metric("conveyor_sqlite_commits_total");
  const throttledBefore = await daemon.metric("conveyor_concurrency_throttled_total");
  const rpcBefore = await rpcTimes(daemon);
  const ioBefore = ioOf(daemon.pid);
  const monoStart = monotonicUs();
  const worker = await ctx.worker(daemon, { queue: QUEUE, concurrency: CONCURRENCY, sleepMs: SLEEP_MS, record: true, expect: TASKS });
  const cpu = new CpuMeter({ daemon: daemon.pid, worker: worker.pid });
  const finished = await worker.waitDone({
    stallMs: STALL_MS,
    onProgress: (p) => ctx.progress(`${name}: ${p.completed}/${TASKS} completed, ${p.inFlight} in flight`),
    describeStall: async () => `node counts: ${fmtCounts(await admin.counts(QUEUE))}`,
  });
  const usage = cpu.reading(TASKS);
  const profileWindowUs = [monoStart, monotonicUs()];
  const ioAfter = ioOf(daemon.pid);
  const daemonWrites = ioBefore && ioAfter
    ? { wcharPerTask: (ioAfter.wchar - ioBefore.wchar) / TASKS, storageBytesPerTask: (ioAfter.writeBytes - ioBefore.writeBytes) / TASKS }
    : undefined;
  // Both instants are the worker process's clock.
  const totalMs = finished.at - worker.startedAt;
  const ratio = totalMs / IDEAL_MS;
  ctx.progress(`${name}: ${TASKS} completed in ${fmtMs(totalMs)} ms = ${ratio.toFixed(2)}x ideal`, true);

  const counts = await until(`completed = ${TASKS}`, async () => {
    const c = await admin.counts(QUEUE);
    return c.completed >= TASKS ? c : undefined;
  }, 10_000, 20).catch(() => admin.counts(QUEUE));
  const commits = (await daemon.metric("conveyor_sqlite_commits_total")) - commitsBefore;
  const throttled = (await daemon.metric("conveyor_concurrency_throttled_total")) - throttledBefore;
  const rpc = rpcDelta(rpcBefore, await rpcTimes(daemon));
  const lease = rpc.find((m) => m.method.toLowerCase() === "lease");
  const settle = rpc.find((m) => m.method.toLowerCase() === "settle");
  const report = await worker.report();
  const r = report.records;
  if (r.start.length !== TASKS) throw new Error(`${name}: expected ${TASKS} handler records, got ${r.start.length}`);

  // Per-key overlap from the handler timestamps.
  const byKey = new Map<string, { starts: number[]; ends: number[] }>();
  for (let i = 0; i < r.start.length; i++) {
    const key = r.concurrencyKey[i]!;
    let k = byKey.get(key);
    if (!k) byKey.set(key, (k = { starts: [], ends: [] }));
    k.starts.push(r.start[i]!);
    k.ends.push(r.end[i]!);
  }
  const overlapByKey = [...byKey].map(([key, k]) => ({ key, tasks: k.starts.length, maxActive: maxOverlap(k.starts, k.ends) }));
  const violations = limit === undefined ? [] : overlapByKey.filter((k) => k.maxActive > limit);
  const maxActive = Math.max(...overlapByKey.map((k) => k.maxActive));
  const keysAtLimit = limit === undefined ? 0 : overlapByKey.filter((k) => k.maxActive === limit).length;
  const allActive = maxOverlap(r.start, r.end);
  const keyless = r.concurrencyKey.filter((k) => k === "").length;

  // What the handlers themselves cost: their mean duration bounds the run from below.
  const durations = r.start.map((s, i) => r.end[i]! - s);
  const handler = summarize(durations);
  const busyMs = durations.reduce((a, b) => a + b, 0);
  const handlerBoundMs = busyMs / CONCURRENCY;
  const firstStartMs = finished.firstStartAt - worker.startedAt;
  const lastStart = Math.max(...r.start);
  const utilization = busyMs / (CONCURRENCY * totalMs);
  /** A slot's mean wait between one handler's end and the next handler's start. */
  const slotIdlePerTaskMs = (CONCURRENCY * totalMs - busyMs) / TASKS;
  const leaseCycleMs = totalMs / Math.max(1, report.startClusters);
  // Per-key finish: when each key's last handler ended (the tail shows keys left behind).
  const keyFinish = [...byKey].map(([, k]) => Math.max(...k.ends) - worker.startedAt);
  const keyFinishSummary = summarize(keyFinish);
  const tail = tailProfile(r.start, r.end, worker.startedAt, finished.at);

  await ctx.release(daemon);
  const check = counts.completed === TASKS ? `ListQueues completed=${TASKS} ok` : `COUNT MISMATCH: ${fmtCounts(counts)}`;
  const errors = report.errors.count > 0 ? `; worker errors ${report.errors.count}: ${report.errors.samples.join(" | ")}` : "";
  return {
    scenario: name, tasks: TASKS, seconds: totalMs / 1000, tasksPerSec: TASKS / (totalMs / 1000),
    p50Ms: handler.p50, p99Ms: handler.p99,
    notes: `${limit === undefined ? "no limit (control)" : `limit ${limit}/key`}: ${fmtMs(totalMs)} ms = ${ratio.toFixed(2)}x ideal ${fmtMs(IDEAL_MS)} ms; ` +
      (limit === undefined
        ? `max active per key ${maxActive}; `
        : `max active per key ${maxActive} (${violations.length} violations, ${keysAtLimit}/${byKey.size} keys reached ${limit}); `) +
      `p50/p99 = handler duration; handler-bound ${fmtMs(handlerBoundMs)} ms, slots ${Math.round(utilization * 100)}% busy ` +
      `(idle ${fmtMs(slotIdlePerTaskMs)} ms between tasks), first handler +${fmtMs(firstStartMs)} ms; ` +
      `${fmtNum(TASKS / Math.max(1, report.startClusters))} deliveries/Lease answer, one answer every ${fmtMs(leaseCycleMs)} ms; ` +
      `server time Lease ${fmtMs(lease?.meanMs)} ms x${lease?.calls ?? 0}, Settle ${fmtMs(settle?.meanMs)} ms x${settle?.calls ?? 0}; ${check}; ${fmtNum(commits / (TASKS / 1000))} commits/1k; cpu ${fmtCpu(usage)}${errors}`,
    targets: limit === undefined ? [] : [
      target("x ideal", "<=", TARGET_RATIO, ratio, "x"),
      target("keys over limit", "<=", 0, violations.length, "keys"),
    ],
    details: {
      limit: limit ?? null, keys: KEYS, sleepMs: SLEEP_MS, concurrency: CONCURRENCY, idealMs: IDEAL_MS, totalMs, ratioToIdeal: ratio,
      enqueueSeconds, maxActivePerKey: maxActive, violations, keysReachingLimit: keysAtLimit, maxActiveAllKeys: allActive,
      keylessHandled: keyless, handlerDurationMs: handler, handlerBoundMs, slotUtilization: utilization, slotIdlePerTaskMs, leaseCycleMs,
      firstHandlerAfterStartMs: firstStartMs, lastHandlerStartAfterStartMs: lastStart - worker.startedAt,
      keyFinishMs: keyFinishSummary, tail, throttledCycles: throttled, serverRpcTimes: rpc, sqliteCommits: commits, counts, cpuPercent: usage.percent, cpuUsPerTask: usage.usPerTask,
      daemonWrites, profileWindowUs, daemonPid: daemon.pid, workerPid: worker.pid, workerErrors: report.errors, maxInFlight: report.maxInFlight, leaseResponsesApprox: report.startClusters,
    },
  };
}

type RpcTimes = { sum: Record<string, number>; count: Record<string, number> };

/** Server-side handling time per RPC method so far (conveyor_rpc_duration_seconds). */
async function rpcTimes(daemon: Daemon): Promise<RpcTimes> {
  return {
    sum: await daemon.metricBy("conveyor_rpc_duration_seconds_sum", "method"),
    count: await daemon.metricBy("conveyor_rpc_duration_seconds_count", "method"),
  };
}

function rpcDelta(a: RpcTimes, b: RpcTimes): Array<{ method: string; calls: number; meanMs: number; totalMs: number }> {
  return Object.keys(b.count).map((method) => {
    const calls = b.count[method]! - (a.count[method] ?? 0);
    const totalMs = (b.sum[method]! - (a.sum[method] ?? 0)) * 1000;
    return { method, calls, meanMs: calls > 0 ? totalMs / calls : Number.NaN, totalMs };
  }).filter((m) => m.calls > 0);
}

/**
 * Handlers running, averaged per 100 ms window of the run: with 50 slots this stays near
 * 50 in an ideal run; a slump shows starved slots (dispatch lag) or a key-bound tail.
 */
function tailProfile(starts: readonly number[], ends: readonly number[], from: number, to: number): number[] {
  const windowMs = 100;
  const buckets = new Array<number>(Math.max(1, Math.ceil((to - from) / windowMs))).fill(0);
  for (let i = 0; i < starts.length; i++) {
    const s = starts[i]! - from;
    const e = ends[i]! - from;
    for (let b = Math.max(0, Math.floor(s / windowMs)); b < buckets.length && b * windowMs < e; b++) {
      const lo = Math.max(s, b * windowMs);
      const hi = Math.min(e, (b + 1) * windowMs);
      if (hi > lo) buckets[b]! += (hi - lo) / windowMs;
    }
  }
  return buckets.map((x) => +x.toFixed(1));
}

/**
 * Warm-up on another queue of the same node (same limit, keys and handler): runs the
 * dispatch, key-slot, lease and settle paths through the JIT, then stops its worker.
 */
async function warmUp(ctx: ScenarioContext, daemon: Daemon, limit: number | undefined): Promise<void> {
  const admin = ctx.admin(daemon);
  const client = ctx.client(daemon);
  if (limit !== undefined) await admin.admin.setQueueConcurrencyLimit({ queue: WARMUP_QUEUE, max: limit });
  const w = await ctx.worker(daemon, { queue: WARMUP_QUEUE, concurrency: CONCURRENCY, sleepMs: SLEEP_MS, record: false });
  await waitParked(daemon);
  w.measure(WARMUP);
  const keyOf = shuffledKeys(WARMUP, KEYS, 7);
  await enqueueBatches(client, BATCH, { queue: WARMUP_QUEUE, count: WARMUP, offset: 950_000, options: (i) => ({ concurrencyKey: keyName(keyOf[i]!) }) });
  await w.waitDone({ stallMs: STALL_MS });
  await w.stop();
  await until("warm-up tasks to be completed", async () => ((await admin.counts(WARMUP_QUEUE)).completed === WARMUP ? true : undefined), 10_000, 20);
}
