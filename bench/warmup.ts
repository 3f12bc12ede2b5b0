/**
 * Warm-up before a measurement (JIT, connections, grain activation) and the readiness
 * check of a worker: its Lease call parked on the node (GET /healthz parkedLeases).
 */
import type { Client, NewTaskSpec } from "../src/index.js";
import type { Daemon } from "./daemon.js";
import { enqueueBatches, enqueueLanes } from "./producer.js";
import { until } from "./time.js";
import type { WorkerProcess } from "./worker-handle.js";

/** Enqueue-path warm-up: single, concurrent and batched enqueues into `queue` (no worker). */
export async function warmUpProducer(client: Client, queue: string, count = 1_000): Promise<void> {
  const third = Math.max(1, Math.floor(count / 3));
  await enqueueLanes(client, 1, { queue, count: third, offset: 900_000 });
  await enqueueLanes(client, 50, { queue, count: third, offset: 910_000 });
  await enqueueBatches(client, 1_000, { queue, count: third, offset: 920_000 });
}

/**
 * Runs `count` tasks through the worker on `queue` (singles and batches), waits until
 * they are all handled and the worker's next Lease call is parked. `task` builds the
 * warm-up tasks (from an index ≥ 930,000) when the default payload does not fit.
 */
export async function warmUpWorker(client: Client, daemon: Daemon, worker: WorkerProcess, queue: string, count = 1_000, task?: (i: number) => NewTaskSpec): Promise<void> {
  worker.measure(count);
  const half = Math.floor(count / 2);
  await enqueueLanes(client, 10, { queue, count: half, offset: 930_000, ...(task ? { task: (i: number) => task(930_000 + i) } : {}) });
  await enqueueBatches(client, 1_000, { queue, count: count - half, offset: 940_000, ...(task ? { task: (i: number) => task(940_000 + i) } : {}) });
  await worker.waitDone({ stallMs: 15_000 });
  await waitParked(daemon);
}

/** Waits until at least `n` Lease calls are parked on the node (workers idle and ready). */
export async function waitParked(daemon: Daemon, n = 1): Promise<void> {
  await until(`${n} parked lease call(s)`, async () => ((await daemon.health()).parkedLeases >= n ? true : undefined), 10_000, 5);
}
