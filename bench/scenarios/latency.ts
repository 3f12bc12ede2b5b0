/**
 * Pickup latency when the queue is not saturated: a worker process (concurrency 50)
 * idles on the queue while tasks are enqueued at a steady pace (200/s by default, one
 * single enqueue call every 5 ms on a drift-compensating schedule). Each payload
 * carries the producer's clock when its enqueue call was issued; the worker records
 * when the handler started. Pickup latency = handler start - enqueue call issued.
 */
import { CpuMeter, fmtCpu } from "../cpu.js";
import { benchTask } from "../payload.js";
import { target, type ResultRow, type Scenario } from "../scenario.js";
import { fmtMs, summarize } from "../stats.js";
import { sleep, wallNow } from "../time.js";
import { warmUpWorker } from "../warmup.js";

const QUEUE = "bench-latency";
const CONCURRENCY = 50;

export const latencyScenario: Scenario = {
  name: "latency",
  description: "pickup latency (enqueue call → handler start), paced below saturation",
  async run(ctx) {
    const n = ctx.options.latencyTasks;
    const rate = ctx.options.latencyRate;
    const intervalMs = 1000 / rate;
    const daemon = await ctx.daemon({ label: "latency" });
    const worker = await ctx.worker(daemon, { queue: QUEUE, concurrency: CONCURRENCY, sleepMs: 0, record: true });
    const client = ctx.client(daemon);
    await warmUpWorker(client, daemon, worker, QUEUE, 1_000);
    const clock = await worker.clockOffset();

    worker.measure(n);
    const done = worker.waitDone({ stallMs: 15_000, onProgress: (p) => ctx.progress(`latency: ${p.completed}/${n} picked up`) });
    done.catch(() => {});
    const commitsBefore = await daemon.metric("conveyor_sqlite_commits_total");
    const acks: Array<Promise<number>> = [];
    const cpu = new CpuMeter({ daemon: daemon.pid, worker: worker.pid, producer: process.pid });
    const start = wallNow() + 10;
    let lateMax = 0;
    for (let i = 0; i < n; i++) {
      const due = start + i * intervalMs;
      const wait = due - wallNow();
      if (wait > 0) await sleep(wait);
      const sentAt = wallNow();
      lateMax = Math.max(lateMax, sentAt - due);
      acks.push(client.enqueue(benchTask(i, sentAt), { queue: QUEUE }).then(() => wallNow() - sentAt));
    }
    const issuedSeconds = (wallNow() - start) / 1000;
    const ackLatencies = await Promise.all(acks);
    await done;
    const usage = cpu.reading(n);
    const report = await worker.report();
    const commits = (await daemon.metric("conveyor_sqlite_commits_total")) - commitsBefore;

    const pickups: number[] = [];
    const timeline: Array<{ atMs: number; pickupMs: number }> = [];
    report.records.start.forEach((s, i) => {
      const sent = report.records.sentAt[i]!;
      if (!Number.isFinite(sent)) return;
      pickups.push(s - sent);
      timeline.push({ atMs: sent - start, pickupMs: s - sent });
    });
    if (pickups.length !== n) throw new Error(`expected ${n} pickup records, got ${pickups.length}`);
    const pickup = summarize(pickups);
    const ack = summarize(ackLatencies);
    ctx.progress(`latency: pickup p50 ${fmtMs(pickup.p50)} ms, p99 ${fmtMs(pickup.p99)} ms, max ${fmtMs(pickup.max)} ms`, true);
    const errors = report.errors.count > 0 ? `; worker errors ${report.errors.count}` : "";
    return [{
      scenario: "latency", tasks: n, seconds: issuedSeconds, tasksPerSec: n / issuedSeconds, p50Ms: pickup.p50, p99Ms: pickup.p99,
      notes: `pickup = enqueue call -> handler start, paced ${rate}/s; max ${fmtMs(pickup.max)} ms; ` +
        `enqueue ack p50 ${fmtMs(ack.p50)} / p99 ${fmtMs(ack.p99)} ms; ${(commits / n).toFixed(1)} commits/task; cpu ${fmtCpu(usage)}${errors}`,
      targets: [target("pickup p50 ms", "<=", 1, pickup.p50, "ms"), target("pickup p99 ms", "<=", 5, pickup.p99, "ms")],
      details: {
        pickupMs: pickup, enqueueAckMs: ack, paceIntervalMs: intervalMs, maxScheduleLagMs: lateMax,
        workerClockOffsetMs: clock.offsetMs, clockProbeRttMs: clock.rttMs, cpuPercent: usage.percent, cpuUsPerTask: usage.usPerTask, workerErrors: report.errors,
        sqliteCommitsPerTask: commits / n, perSecond: perSecond(timeline),
        slowest: timeline.sort((a, b) => b.pickupMs - a.pickupMs).slice(0, 10).map((x) => ({ atMs: Math.round(x.atMs), pickupMs: +x.pickupMs.toFixed(2) })),
      },
    }];
  },
};

/** Pickup p50/p99 per second of the run, to tell steady latency from bursts. */
function perSecond(timeline: ReadonlyArray<{ atMs: number; pickupMs: number }>): Array<{ second: number; p50Ms: number; p99Ms: number }> {
  const buckets = new Map<number, number[]>();
  for (const { atMs, pickupMs } of timeline) {
    const second = Math.max(0, Math.floor(atMs / 1000));
    const list = buckets.get(second) ?? [];
    list.push(pickupMs);
    buckets.set(second, list);
  }
  return [...buckets].sort((a, b) => a[0] - b[0]).map(([second, values]) => {
    const s = summarize(values);
    return { second, p50Ms: +s.p50.toFixed(2), p99Ms: +s.p99.toFixed(2) };
  });
}
