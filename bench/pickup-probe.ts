/**
 * Pickup latency of a paced stream (enqueue call → handler start), as in the latency
 * scenario, for scenarios that compare it with and without something else going on in
 * the node (the same worker, the same minute: only the side load differs).
 */
import type { Client } from "../src/index.js";
import { benchTask } from "./payload.js";
import { summarize, type Summary } from "./stats.js";
import { sleep, wallNow } from "./time.js";
import type { WorkerProcess } from "./worker-handle.js";

/** Enqueues `n` tasks into `queue`, one every 1000/`rate` ms, and summarises their pickup latency. */
export async function pacedPickup(client: Client, worker: WorkerProcess, queue: string, n: number, rate: number): Promise<Summary> {
  const clock = await worker.clockOffset();
  worker.measure(n);
  const done = worker.waitDone({ stallMs: 30_000 });
  done.catch(() => {});
  const start = wallNow() + 10;
  const acks: Array<Promise<unknown>> = [];
  for (let i = 0; i < n; i++) {
    const wait = start + (i * 1000) / rate - wallNow();
    if (wait > 0) await sleep(wait);
    acks.push(client.enqueue(benchTask(i, wallNow()), { queue }));
  }
  await Promise.all(acks);
  await done;
  const report = await worker.report();
  const pickups = report.records.start.map((s, i) => s - report.records.sentAt[i]!).filter(Number.isFinite);
  if (pickups.length !== n) throw new Error(`expected ${n} pickup records, got ${pickups.length} (clock offset ${clock.offsetMs} ms)`);
  return summarize(pickups);
}
