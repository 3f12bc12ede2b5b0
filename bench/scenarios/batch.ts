/**
 * Group aggregation: 10,000 events into 100 groups (100 each, in a seeded shuffled
 * order), queue-wide group config max size 100, max delay 1 s, grace 5 s (so max size
 * and max delay decide), enqueued with 50 single `client.enqueue` calls in flight while
 * one worker process with a batch handler (`mux.handleBatch`, concurrency 50) runs.
 *
 * Reported: handler calls (ideal 100: one per group), mean batch size, calls that mixed
 * groups (must be 0), event → handler latency (the payload's `ts` is the producer's
 * clock when the enqueue call was issued; the handler call's start is the worker's),
 * total time from the first enqueue call to the handler call that completed the last
 * event, and the loss check: the batch sizes sum to 10,000 and ListQueues counts
 * 10,000 more completed tasks.
 */
import { fmtCounts } from "../admin.js";
import { CpuMeter, fmtCpu, ioOf } from "../cpu.js";
import { payloadOf, shuffledKeys } from "../payload.js";
import { enqueueLanes } from "../producer.js";
import { TASK_TYPE } from "../protocol.js";
import { target, type Scenario } from "../scenario.js";
import { fmtMs, fmtNum, summarize } from "../stats.js";
import { monotonicUs, until, wallNow } from "../time.js";
import { warmUpWorker } from "../warmup.js";
import { json, newTask } from "../../src/index.js";

const QUEUE = "bench-batch";
const EVENTS = 10_000;
const GROUPS = 100;
const LANES = 50;
const CONCURRENCY = 50;
const MAX_SIZE = 100;
const MAX_DELAY_MS = 1_000;
const GRACE_MS = 5_000;
const WARMUP = 1_000;
const STALL_MS = 15_000;

export const batchScenario: Scenario = {
  name: "batch",
  description: "group aggregation: 10,000 events into 100 groups (max size 100, max delay 1 s), 50 enqueues in flight, batch handler",
  async run(ctx) {
    const daemon = await ctx.daemon({ label: "batch" });
    const worker = await ctx.worker(daemon, { queue: QUEUE, concurrency: CONCURRENCY, sleepMs: 0, record: true, batch: true });
    const client = ctx.client(daemon);
    const admin = ctx.admin(daemon);
    await admin.admin.setGroupConfig({
      config: { queue: QUEUE, group: "", maxSize: MAX_SIZE, maxDelayMs: BigInt(MAX_DELAY_MS), graceMs: BigInt(GRACE_MS) },
    });
    // Group-less tasks: the batch handler serves them as batches of one (lease, settle, JIT).
    await warmUpWorker(client, daemon, worker, QUEUE, WARMUP);
    await until("warm-up tasks to be completed", async () => ((await admin.counts(QUEUE)).completed === WARMUP ? true : undefined), 10_000, 20);
    const clock = await worker.clockOffset();

    worker.measure(EVENTS);
    let enqueued = 0;
    let handled = 0;
    const show = () => ctx.progress(`batch: ${enqueued}/${EVENTS} enqueued, ${handled}/${EVENTS} handled`);
    const done = worker.waitDone({
      stallMs: STALL_MS,
      onProgress: (p) => {
        handled = p.completed;
        show();
      },
      describeStall: async () => `node counts: ${fmtCounts(await admin.counts(QUEUE))}`,
    });
    done.catch(() => {});
    const groupOf = shuffledKeys(EVENTS, GROUPS, 42);
    const groupName = (k: number) => `g-${String(k).padStart(3, "0")}`;
    const cpu = new CpuMeter({ daemon: daemon.pid, worker: worker.pid, producer: process.pid });
    const ioBefore = ioOf(daemon.pid);
    const monoStart = monotonicUs();
    const t0 = wallNow();
    const acks = await enqueueLanes(client, LANES, {
      queue: QUEUE, count: EVENTS,
      task: (i) => newTask(TASK_TYPE, json(payloadOf(i, wallNow()))),
      options: (i) => ({ group: groupName(groupOf[i]!) }),
      onProgress: (k) => {
        enqueued = k;
        show();
      },
    });
    const enqueueMs = wallNow() - t0;
    enqueued = EVENTS;
    ctx.progress(`batch: ${EVENTS} enqueued in ${fmtMs(enqueueMs)} ms; waiting for the groups to fire`, true);
    const finished = await done;
    const usage = cpu.reading(EVENTS);
    const profileWindowUs = [monoStart, monotonicUs()];
    const ioAfter = ioOf(daemon.pid);
    const daemonWrites = ioBefore && ioAfter
      ? { wcharPerTask: (ioAfter.wchar - ioBefore.wchar) / EVENTS, storageBytesPerTask: (ioAfter.writeBytes - ioBefore.writeBytes) / EVENTS }
      : undefined;
    // The worker's clock, brought to ours (the offset is ~0 on one machine).
    const totalMs = finished.at - clock.offsetMs - t0;

    const counts = await until(`completed = ${WARMUP + EVENTS}`, async () => {
      const c = await admin.counts(QUEUE);
      return c.completed >= WARMUP + EVENTS ? c : undefined;
    }, 10_000, 20).catch(() => admin.counts(QUEUE));
    const leftInGroups = (await admin.admin.listGroups({ queue: QUEUE })).groups.length;
    const report = await worker.report();
    const calls = report.calls;
    const sizes = summarize(calls.size);
    const eventsInCalls = calls.size.reduce((a, b) => a + b, 0);
    const mixed = calls.groups.filter((g) => g > 1).length;
    const completedDelta = counts.completed - WARMUP;
    const lost = EVENTS - Math.min(eventsInCalls, completedDelta);
    const r = report.records;
    const latencies = r.start.map((s, i) => s - clock.offsetMs - r.sentAt[i]!).filter((x) => Number.isFinite(x));
    const latency = summarize(latencies);
    // Calls per group and when they ran, relative to the first enqueue call.
    const callsPerGroup = new Map<string, number>();
    for (const g of calls.group) callsPerGroup.set(g, (callsPerGroup.get(g) ?? 0) + 1);
    const callTimes = calls.start.map((s) => s - clock.offsetMs - t0);
    const firstCallMs = Math.min(...callTimes);
    const lastCallMs = Math.max(...callTimes);
    const limitMs = 1.5 * enqueueMs + 1_000;
    // Calls of fewer than max size members: their group fired on max delay (or grace) while still filling.
    const partial = calls.size.filter((s) => s < MAX_SIZE).length;
    const duringEnqueue = callTimes.filter((t) => t < enqueueMs).length;
    ctx.progress(`batch: ${calls.start.length} handler calls, mean size ${sizes.mean.toFixed(1)}, ${mixed} mixed; ` +
      `latency p50 ${fmtMs(latency.p50)} / p99 ${fmtMs(latency.p99)} ms; total ${fmtMs(totalMs)} ms`, true);

    const check = lost === 0 && completedDelta === EVENTS
      ? `no event lost (sum of batch sizes ${eventsInCalls}, ListQueues completed ${completedDelta})`
      : `LOST ${lost}: sum of batch sizes ${eventsInCalls}, ListQueues completed ${completedDelta} (${fmtCounts(counts)})`;
    const errors = report.errors.count > 0 ? `; worker errors ${report.errors.count}: ${report.errors.samples.join(" | ")}` : "";
    return [{
      scenario: "batch", tasks: EVENTS, seconds: totalMs / 1000, tasksPerSec: EVENTS / (totalMs / 1000), p50Ms: latency.p50, p99Ms: latency.p99,
      notes: `${calls.start.length} handler calls (ideal ${GROUPS}), mean batch ${sizes.mean.toFixed(1)} (min ${sizes.min}, max ${sizes.max}), ` +
        `${mixed} mixed; ${partial} partial (fired on max delay while filling), ${duringEnqueue} during the enqueue phase; ` +
        `p50/p99 = event -> handler call; enqueue ${fmtMs(enqueueMs)} ms (${fmtNum(EVENTS / (enqueueMs / 1000))}/s), ` +
        `total ${fmtMs(totalMs)} ms (limit ${fmtMs(limitMs)}); calls from +${fmtMs(firstCallMs)} to +${fmtMs(lastCallMs)} ms; ${check}; cpu ${fmtCpu(usage)}${errors}`,
      targets: [
        target("handler calls", "<=", GROUPS, calls.start.length, "calls"),
        target("mixed-group calls", "<=", 0, mixed, "calls"),
        target("total ms (1.5 x enqueue + 1 s)", "<=", limitMs, totalMs, "ms"),
        target("events lost", "<=", 0, lost, "events"),
      ],
      details: {
        groups: GROUPS, maxSize: MAX_SIZE, maxDelayMs: MAX_DELAY_MS, graceMs: GRACE_MS, lanes: LANES,
        handlerCalls: calls.start.length, batchSize: sizes, mixedCalls: mixed, partialCalls: partial, callsDuringEnqueue: duringEnqueue, eventsInCalls, completedDelta, lost,
        groupsLeftAggregating: leftInGroups, callsPerGroup: summarize([...callsPerGroup.values()]),
        eventToHandlerMs: latency, enqueueMs, enqueueAckMs: summarize(acks), totalMs, totalLimitMs: limitMs,
        firstCallAfterMs: firstCallMs, lastCallAfterMs: lastCallMs,
        callTimesMs: summarize(callTimes), workerClockOffsetMs: clock.offsetMs, clockProbeRttMs: clock.rttMs,
        counts, cpuPercent: usage.percent, cpuUsPerTask: usage.usPerTask, workerErrors: report.errors, daemonWrites, profileWindowUs, daemonPid: daemon.pid, workerPid: worker.pid,
      },
    }];
  },
};
