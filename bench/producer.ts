/**
 * Producer loops: N enqueues one at a time, with L calls in flight, or in batches.
 * Each returns per-call latencies (ms); any failed enqueue fails the run.
 */
import type { Client, ConveyorError, EnqueueOptions, NewTaskSpec, TaskInfo } from "../src/index.js";
import { benchTask } from "./payload.js";
import { wallNow } from "./time.js";

export interface ProduceOptions {
  queue: string;
  count: number;
  /** Payload index of the first task (keeps payloads distinct across phases). */
  offset?: number;
  /** Called every `progressEvery` tasks with the number enqueued so far. */
  onProgress?: (enqueued: number) => void;
  progressEvery?: number;
  /** The i-th task (i counts from 0, `offset` not added), built when its call is issued; default benchTask(offset + i). */
  task?: (i: number) => NewTaskSpec;
  /** Enqueue options of the i-th task besides `queue` (e.g. a concurrency key or group). */
  options?: (i: number) => Omit<EnqueueOptions, "queue">;
}

const taskOf = (o: ProduceOptions, i: number): NewTaskSpec => (o.task ? o.task(i) : benchTask((o.offset ?? 0) + i));
const optionsOf = (o: ProduceOptions, i: number): EnqueueOptions => (o.options ? { ...o.options(i), queue: o.queue } : { queue: o.queue });

/** Awaits `client.enqueue` `count` times, `lanes` calls in flight (1 = strictly sequential). */
export async function enqueueLanes(client: Client, lanes: number, o: ProduceOptions): Promise<number[]> {
  const latencies = new Array<number>(o.count);
  const every = o.progressEvery ?? 1_000;
  let next = 0;
  let done = 0;
  const lane = async () => {
    for (let i = next++; i < o.count; i = next++) {
      const t0 = wallNow();
      await client.enqueue(taskOf(o, i), optionsOf(o, i));
      latencies[i] = wallNow() - t0;
      if (++done % every === 0) o.onProgress?.(done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(lanes, o.count) }, lane));
  return latencies;
}

/** `client.enqueueBatch` of `batchSize` items per call, one call at a time. Returns per-call latencies. */
export async function enqueueBatches(client: Client, batchSize: number, o: ProduceOptions): Promise<number[]> {
  const latencies: number[] = [];
  for (let start = 0; start < o.count; start += batchSize) {
    const n = Math.min(batchSize, o.count - start);
    const t0 = wallNow();
    const items = Array.from({ length: n }, (_, k) => ({ task: taskOf(o, start + k), options: optionsOf(o, start + k) }));
    const results = await client.enqueueBatch(items);
    latencies.push(wallNow() - t0);
    const failed = results.find((r): r is ConveyorError => !isInfo(r));
    if (failed) throw new Error(`enqueueBatch item failed: ${failed.message}`);
    o.onProgress?.(start + n);
  }
  return latencies;
}

const isInfo = (r: TaskInfo | ConveyorError): r is TaskInfo => typeof (r as TaskInfo).id === "string" && !(r instanceof Error);
