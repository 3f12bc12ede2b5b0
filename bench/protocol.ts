/** IPC messages between the benchmark and its worker process (bench/worker-process.ts). */
import type { ConcurrencyRuleSpec } from "../src/index.js";

/** The task type every benchmark task uses. */
export const TASK_TYPE = "bench:task";

export interface WorkerConfig {
  address: string;
  queue: string;
  concurrency: number;
  /** The handler sleeps this long; 0 is a no-op handler. */
  sleepMs: number;
  /** Keep per-task handler timestamps (and parse the payload's `ts`) for `report`. */
  record: boolean;
  /**
   * Register the handler with `mux.handleBatch` (one call per fired group; every member
   * counts as a handled task and, with `record`, gets a record; each call is also kept
   * in the report's `calls`). Default: a plain `mux.handle` handler.
   */
  batch?: boolean;
  /** Concurrency rules declared with the handler (`mux.handle(type, fn, { concurrency })`). */
  rules?: ConcurrencyRuleSpec[];
  /**
   * Start measuring at once, expecting this many handled tasks (as `measure` would), for
   * scenarios that enqueue before the worker starts: `measure` would come too late.
   */
  expect?: number;
}

export type ToWorker =
  | { type: "init"; config: WorkerConfig }
  /** Resets counters, records and errors; `done` is sent once `expect` handlers have finished. */
  | { type: "measure"; expect: number }
  | { type: "report" }
  | { type: "ping"; sentAt: number }
  | { type: "stop" };

/** Per-task handler timings, columnar (one index per handled task, in start order). */
export interface HandlerRecords {
  taskId: string[];
  /** Handler start and end, wallNow() ms. */
  start: number[];
  end: number[];
  /** The payload's `ts` field (the producer's enqueue-call time), NaN when absent. */
  sentAt: number[];
  concurrencyKey: string[];
  group: string[];
}

/** Batch handler calls, columnar (one index per call, in start order). */
export interface BatchCalls {
  /** Call start and end, wallNow() ms. */
  start: number[];
  end: number[];
  /** Members in the call. */
  size: number[];
  /** Distinct groups among the members (1 = not mixed). */
  groups: number[];
  /** The first member's group. */
  group: string[];
}

export interface WorkerErrors {
  count: number;
  byContext: Record<string, number>;
  samples: string[];
}

export type FromWorker =
  /**
   * Sent once the SDK Worker has registered its task types (and rules): `at` is the
   * worker's wallNow() just before `Worker.start()`.
   */
  | { type: "started"; pid: number; workerId: string; at: number }
  | { type: "progress"; completed: number; expect: number; inFlight: number }
  | { type: "done"; completed: number; at: number; firstStartAt: number }
  /**
   * `startClusters`: groups of handler starts less than 0.2 ms apart. Handlers of one
   * Lease response start in one synchronous loop, so with a fast handler this counts
   * Lease responses: completed / startClusters ≈ deliveries per Lease response.
   */
  | { type: "report"; records: HandlerRecords; calls: BatchCalls; errors: WorkerErrors; maxInFlight: number; startClusters: number }
  | { type: "pong"; sentAt: number; at: number }
  | { type: "stopped" }
  | { type: "fatal"; message: string };
