/**
 * The metrics an operator alerts on, scraped over HTTP from a real node after a scripted
 * workload: depth per queue and state, oldest pending age, wait and run time histograms,
 * retries and lease expiries, with exact series values.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { NodeProcess, eventually } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

beforeAll(async () => {
  // A short lease TTL: a lease nobody heartbeats lapses within a second.
  node = await NodeProcess.start({ settings: { lease_ttl: "1s", heartbeat_interval: "200ms" } });
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

/** The value of one series in a Prometheus text exposition; undefined when it is absent. */
function series(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2] ? m[2].split(",") : [];
    if (have.length === wanted.length && wanted.every((w) => have.includes(w))) return Number(m[3]);
  }
  return undefined;
}

describe("operator metrics", () => {
  it("count depth, age, wait and run times, retries and lease expiries exactly", async () => {
    // A lease that lapses: taken by hand and never heartbeated.
    const { id: lapsing } = await sdk.client.enqueue(newTask("lapse:me", json({})), { queue: "lapse" });
    const [delivery] = await sdk.leaseNow("lapse");
    expect(delivery?.tasks[0]?.id).toBe(lapsing);
    await eventually("the lease to lapse", async () =>
      series(await node.metrics(), "conveyor_leases_expired_total", { queue: "lapse" }) === 1 ? true : undefined);

    // One task completes, one fails once and then completes, one is scheduled for later.
    let flakyRuns = 0;
    sdk.worker(new Mux()
      .handle("ok", async () => {})
      .handle("flaky", async () => {
        flakyRuns += 1;
        if (flakyRuns === 1) throw new Error("first attempt fails");
      }), { queues: ["metered"] });
    const { id: ok } = await sdk.client.enqueue(newTask("ok", json({})), { queue: "metered" });
    const { id: flaky } = await sdk.client.enqueue(newTask("flaky", json({})), { queue: "metered", backoff: { base: "10ms", max: "10ms" } });
    await sdk.client.enqueue(newTask("later", json({})), { queue: "metered", processIn: "1h" });
    await sdk.waitForState(ok, "completed");
    await sdk.waitForState(flaky, "completed");

    // The depth gauges read storage at most once a second: wait for a read made after the
    // last change (one from before the queue had tasks shows no "active" either, so the
    // scheduled task, enqueued before the waits above, must be in it too).
    const text = await eventually("the depth gauges to show the final states", async () => {
      const t = await node.metrics();
      const fresh = series(t, "conveyor_queue_depth", { queue: "metered", state: "active" }) === undefined
        && series(t, "conveyor_queue_depth", { queue: "metered", state: "scheduled" }) !== undefined;
      return fresh ? t : undefined;
    });
    const v = (name: string, labels: Record<string, string> = {}) => series(text, name, labels);

    expect(v("conveyor_tasks_enqueued_total", { queue: "metered" })).toBe(3);
    expect(v("conveyor_tasks_enqueued_total", { queue: "lapse" })).toBe(1);
    expect(v("conveyor_tasks_dispatched_total", { queue: "metered" })).toBe(3); // ok, flaky twice
    expect(v("conveyor_tasks_dispatched_total", { queue: "lapse" })).toBe(1);
    expect(v("conveyor_tasks_finished_total", { queue: "metered", outcome: "completed" })).toBe(2);
    expect(v("conveyor_tasks_retried_total", { queue: "metered" })).toBe(1);
    expect(v("conveyor_tasks_retried_total", { queue: "lapse" })).toBeUndefined(); // a lapse is not a retry
    expect(v("conveyor_leases_expired_total", { queue: "lapse" })).toBe(1);
    expect(v("conveyor_leases_expired_total", { queue: "metered" })).toBeUndefined();

    expect(v("conveyor_task_wait_seconds_count", { queue: "metered" })).toBe(3);
    expect(v("conveyor_task_wait_seconds_count", { queue: "lapse" })).toBe(1);
    expect(v("conveyor_task_run_seconds_count", { queue: "metered", end: "completed" })).toBe(2);
    expect(v("conveyor_task_run_seconds_count", { queue: "metered", end: "retry" })).toBe(1);
    expect(v("conveyor_task_run_seconds_count", { queue: "lapse", end: "completed" })).toBeUndefined();
    // Every run here took well under 5 s, and every wait under 5 s.
    expect(v("conveyor_task_run_seconds_bucket", { queue: "metered", end: "completed", le: "5" })).toBe(2);
    expect(v("conveyor_task_wait_seconds_bucket", { queue: "metered", le: "5" })).toBe(3);

    expect(v("conveyor_queue_depth", { queue: "metered", state: "scheduled" })).toBe(1);
    expect(v("conveyor_queue_depth", { queue: "metered", state: "pending" })).toBeUndefined();
    expect(v("conveyor_queue_depth", { queue: "lapse", state: "pending" })).toBe(1);
    expect(v("conveyor_queue_oldest_pending_age_seconds", { queue: "metered" })).toBeUndefined();
    const age = v("conveyor_queue_oldest_pending_age_seconds", { queue: "lapse" })!;
    expect(age).toBeGreaterThanOrEqual(1); // ready since its enqueue, before its lease lapsed (1 s TTL)
    expect(age).toBeLessThan(60);

    // The dashboard's per-minute history counts the same events (summed: the workload may span a minute boundary).
    const sum = async (queue: string) => {
      const res = await sdk.admin.getActivity({ queue });
      expect(res.buckets).toHaveLength(60);
      expect(res.bucketMs).toBe(60_000n);
      const total = { enqueued: 0, completed: 0, retried: 0, archived: 0 };
      for (const b of res.buckets) for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += Number(b[k]);
      return total;
    };
    expect(await sum("metered")).toEqual({ enqueued: 3, completed: 2, retried: 1, archived: 0 });
    expect(await sum("lapse")).toEqual({ enqueued: 1, completed: 0, retried: 0, archived: 0 });
    expect(await sum("")).toEqual({ enqueued: 4, completed: 2, retried: 1, archived: 0 });
  });
});
