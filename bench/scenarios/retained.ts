/**
 * Retained history (issue 15): a node holding millions of finished tasks must answer
 * ListQueues in O(queues) and must delete expired tasks as fast as they finish, in short
 * transactions, while it keeps answering.
 *
 * 1. Fills a data dir with `--retained-tasks` completed tasks (bench/retained-fill.ts),
 *    all already past their retention, and reports bytes on disk per retained task.
 * 2. Starts a node on it with the janitor held off (janitor_interval 24d) and times
 *    ListQueues over gRPC and GET /metrics (the depth gauges), with a health check
 *    probing every 5 ms meanwhile.
 * 3. Restarts it with janitor_interval 1s and watches ListQueues count the tasks down:
 *    the deletion rate, ListQueues and health-check latency during deletion, and the
 *    node's own event-loop lag maximum (prom-client's nodejs_eventloop_lag_max_seconds,
 *    reset at each scrape, so one scrape before and one after bracket the deletion).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AdminClient } from "../admin.js";
import type { Daemon } from "../daemon.js";
import { trackDir, removeDir } from "../processes.js";
import { pacedPickup } from "../pickup-probe.js";
import { Prober } from "../prober.js";
import { warmUpWorker } from "../warmup.js";
import { fillRetained } from "../retained-fill.js";
import { openDataDir } from "../../src/storage/data-dir.js";
import { AdminQueries } from "../../src/storage/admin-queries.js";
import { target, type ResultRow, type Scenario } from "../scenario.js";
import { fmtMs, summarize } from "../stats.js";
import { sleep, wallNow } from "../time.js";

const QUEUE = "bench-retained";
/** The live queue whose pickup latency is measured next to the retained one. */
const LIVE_QUEUE = "bench-live";
const PICKUP_TASKS = 1_000;
const PICKUP_RATE = 200;
/** ListQueues calls during the pickup comparison: a dashboard polls every 2 s; this is 20 of them. */
const LIST_EVERY_MS = 100;
const LIST_CALLS = 50;
const HEALTH_EVERY_MS = 5;
/** Completion rate the deletion is compared with: the 10-minute soak ran at 1,500 tasks/s. */
const SUSTAINED_COMPLETIONS_PER_SEC = 1_500;

export const retainedScenario: Scenario = {
  name: "retained",
  description: "ListQueues and retention deletion with millions of retained (completed) tasks",
  async run(ctx) {
    const n = ctx.options.retainedTasks;
    const dir = mkdtempSync(join(tmpdir(), "conveyor-bench-retained-"));
    trackDir(dir);
    try {
      const fill = fillRetained(dir, QUEUE, n, 1, (done) => ctx.progress(`retained: ${done.toLocaleString("en-US")}/${n.toLocaleString("en-US")} rows written`));
      ctx.progress(`retained: ${n} rows in ${fill.seconds.toFixed(1)} s, ${(fill.dbBytes / n).toFixed(0)} bytes/task on disk`, true);

      const inProcess = countCost(dir);
      ctx.progress(`retained: in process, ListQueues' query ${fmtMs(inProcess.countsTableMs)} ms; counting the rows ${fmtMs(inProcess.countingRowsMs)} ms`, true);

      // 2. Counting, with the janitor held off so the history stays put.
      let t0 = wallNow();
      const held = await ctx.daemon({ dataDir: dir, settings: { janitor_interval: "24d" }, startTimeoutMs: 600_000 });
      const startSeconds = (wallNow() - t0) / 1000;
      const admin = ctx.admin(held);
      await admin.counts(QUEUE); // connect
      const health = new Prober(() => held.health(), HEALTH_EVERY_MS);
      // The floor: an AdminService call that reads no tasks, timed in the same minute.
      const floor = await timeCalls(LIST_CALLS, () => admin.admin.getClusterInfo({}));
      const list = await timeCalls(LIST_CALLS, () => admin.counts(QUEUE));
      const scrape = await timeCalls(5, () => held.metric("conveyor_queue_depth"));
      const healthWhileListing = summarize(await health.stop());
      const counted = await admin.counts(QUEUE);
      if (counted.completed !== n) throw new Error(`ListQueues counted ${counted.completed} completed tasks, expected ${n}`);
      ctx.progress(`retained: ListQueues p50 ${fmtMs(list.p50)} / max ${fmtMs(list.max)} ms; health max ${fmtMs(healthWhileListing.max)} ms`, true);
      // Pickup p99 of a live queue without, then with, ListQueues called every 100 ms.
      const worker = await ctx.worker(held, { queue: LIVE_QUEUE, concurrency: 50, sleepMs: 0, record: true });
      const client = ctx.client(held);
      await warmUpWorker(client, held, worker, LIVE_QUEUE, 1_000);
      const pickupQuiet = await pacedPickup(client, worker, LIVE_QUEUE, PICKUP_TASKS, PICKUP_RATE);
      const lister = new Prober(() => admin.counts(QUEUE), LIST_EVERY_MS);
      const pickupListed = await pacedPickup(client, worker, LIVE_QUEUE, PICKUP_TASKS, PICKUP_RATE);
      await lister.stop();
      ctx.progress(`retained: pickup p99 ${fmtMs(pickupQuiet.p99)} ms alone, ${fmtMs(pickupListed.p99)} ms with ListQueues every ${LIST_EVERY_MS} ms`, true);
      await ctx.release(held);

      // 3. Deletion.
      t0 = wallNow();
      const node = await ctx.daemon({ dataDir: dir, settings: { janitor_interval: "1s" }, startTimeoutMs: 600_000 });
      const restartSeconds = (wallNow() - t0) / 1000;
      const liveWorker = await ctx.worker(node, { queue: LIVE_QUEUE, concurrency: 50, sleepMs: 0, record: true });
      const liveClient = ctx.client(node);
      await warmUpWorker(liveClient, node, liveWorker, LIVE_QUEUE, 1_000);
      await node.metric("nodejs_eventloop_lag_max_seconds"); // resets the node's lag histogram
      const watching = watchDeletion(ctx.admin(node), node, n, ctx.options.retainedDeleteSeconds, (m) => ctx.progress(m));
      // Pickup while the janitor deletes (its first run comes within janitor_interval, 1 s).
      const pickupDeleting = await pacedPickup(liveClient, liveWorker, LIVE_QUEUE, PICKUP_TASKS, PICKUP_RATE);
      const deletion = await watching;
      const lagMaxMs = (await node.metric("nodejs_eventloop_lag_max_seconds")) * 1000;
      ctx.progress(`retained: deleted ${deletion.deleted} at ${deletion.perSec.toFixed(0)}/s; health p99 ${fmtMs(deletion.health.p99)} / max ${fmtMs(deletion.health.max)} ms; ` +
        `event-loop lag max ${fmtMs(lagMaxMs)} ms`, true);

      const bytesPerTask = fill.dbBytes / n;
      return [{
        scenario: "retained list", tasks: n, seconds: list.total / 1000, tasksPerSec: LIST_CALLS / (list.total / 1000),
        p50Ms: list.p50, p99Ms: list.p99,
        notes: `ListQueues over gRPC with ${n.toLocaleString("en-US")} retained tasks (max ${fmtMs(list.max)} ms; ` +
          `GetClusterInfo, which reads no tasks, p50 ${fmtMs(floor.p50)} / p99 ${fmtMs(floor.p99)} ms); /metrics p50 ${fmtMs(scrape.p50)} ms; ` +
          `health max ${fmtMs(healthWhileListing.max)} ms meanwhile; ${bytesPerTask.toFixed(0)} bytes/task on disk; start ${startSeconds.toFixed(1)} s; ` +
          `in process: the counts ${fmtMs(inProcess.countsTableMs)} ms vs counting the rows (as before) ${fmtMs(inProcess.countingRowsMs)} ms; ` +
          `pickup p99 at ${PICKUP_RATE}/s ${fmtMs(pickupQuiet.p99)} ms alone, ${fmtMs(pickupListed.p99)} ms with ListQueues every ${LIST_EVERY_MS} ms`,
        targets: [target("ListQueues p99 ms", "<=", 5, list.p99, "ms")],
        details: { fill, bytesPerTask, inProcess, listQueuesMs: list, getClusterInfoMs: floor, pickupQuietMs: pickupQuiet, pickupWithListQueuesMs: pickupListed, metricsScrapeMs: scrape, healthWhileListingMs: healthWhileListing, startSeconds },
      }, {
        scenario: "retained delete", tasks: deletion.deleted, seconds: deletion.seconds, tasksPerSec: deletion.perSec,
        p50Ms: deletion.health.p50, p99Ms: deletion.health.p99,
        notes: `expired tasks deleted by the janitor (p50/p99 = health check while deleting; max ${fmtMs(deletion.health.max)} ms); ` +
          `node event-loop lag max ${fmtMs(lagMaxMs)} ms; ListQueues meanwhile p99 ${fmtMs(deletion.list.p99)} ms; ` +
          `pickup at ${PICKUP_RATE}/s meanwhile p50 ${fmtMs(pickupDeleting.p50)} / p99 ${fmtMs(pickupDeleting.p99)} ms; ` +
          `${(deletion.perSec / SUSTAINED_COMPLETIONS_PER_SEC).toFixed(1)}x a ${SUSTAINED_COMPLETIONS_PER_SEC}/s completion rate; restart ${restartSeconds.toFixed(1)} s`,
        targets: [target("deleted/s", ">=", SUSTAINED_COMPLETIONS_PER_SEC, deletion.perSec, "/s"), target("health p99 ms while deleting", "<=", 50, deletion.health.p99, "ms")],
        details: { ...deletion, pickupWhileDeletingMs: pickupDeleting, lagMaxMs, restartSeconds, sustainedCompletionsPerSec: SUSTAINED_COMPLETIONS_PER_SEC },
      }];
    } finally {
      removeDir(dir);
    }
  },
};

/**
 * ListQueues' storage read in this process (no gRPC, no other load on the node), next to
 * the query it replaced (a COUNT(*) over the (queue, state) index), median of a few runs.
 */
function countCost(dir: string): { countsTableMs: number; countingRowsMs: number } {
  const dataDir = openDataDir({ dir, synchronous: "normal" });
  try {
    const queries = new AdminQueries(dataDir.db);
    const countingRows = dataDir.db.sqlite.prepare("SELECT queue, state, COUNT(*) AS n FROM tasks GROUP BY queue, state");
    const median = (fn: () => unknown, runs: number) => {
      const times = Array.from({ length: runs }, () => {
        const t0 = wallNow();
        fn();
        return wallNow() - t0;
      });
      return summarize(times).p50;
    };
    return { countsTableMs: median(() => queries.listQueues(), 101), countingRowsMs: median(() => countingRows.all(), 5) };
  } finally {
    dataDir.close();
  }
}

async function timeCalls(calls: number, call: () => Promise<unknown>): Promise<ReturnType<typeof summarize> & { total: number }> {
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const t0 = wallNow();
    await call();
    times.push(wallNow() - t0);
  }
  return { ...summarize(times), total: times.reduce((a, b) => a + b, 0) };
}

/**
 * Polls ListQueues until the queue's completed count reaches 0 (or `maxSeconds` pass),
 * probing health meanwhile. The rate is counted from the first drop, so the janitor's
 * first interval is not charged to it.
 */
async function watchDeletion(admin: AdminClient, node: Daemon, n: number, maxSeconds: number, progress: (m: string) => void) {
  const health = new Prober(() => node.health(), HEALTH_EVERY_MS * 2);
  const listTimes: number[] = [];
  const deadline = wallNow() + maxSeconds * 1000;
  let firstDropAt: number | undefined;
  let firstDropLeft = n;
  let left = n;
  let lastAt = wallNow();
  while (left > 0 && wallNow() < deadline) {
    const t0 = wallNow();
    left = (await admin.counts(QUEUE)).completed;
    lastAt = wallNow();
    listTimes.push(lastAt - t0);
    if (firstDropAt === undefined && left < n) {
      firstDropAt = lastAt;
      firstDropLeft = left;
    }
    progress(`retained: ${left.toLocaleString("en-US")} left`);
    await sleep(100);
  }
  const seconds = firstDropAt === undefined ? 0 : (lastAt - firstDropAt) / 1000;
  const deleted = n - left;
  return {
    deleted, left, seconds,
    perSec: seconds > 0 ? (firstDropLeft - left) / seconds : 0,
    health: summarize(await health.stop()),
    list: summarize(listTimes),
  };
}
