/** IPC messages between the benchmark and its worker process (bench/worker-process.ts). */

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

export interface WorkerErrors {
  count: number;
  byContext: Record<string, number>;
  samples: string[];
}

export type FromWorker =
  | { type: "started"; pid: number; workerId: string }
  | { type: "progress"; completed: number; expect: number; inFlight: number }
  | { type: "done"; completed: number; at: number; firstStartAt: number }
  /**
   * `startClusters`: groups of handler starts less than 0.2 ms apart. Handlers of one
   * Lease response start in one synchronous loop, so with a fast handler this counts
   * Lease responses: completed / startClusters ≈ deliveries per Lease response.
   */
  | { type: "report"; records: HandlerRecords; errors: WorkerErrors; maxInFlight: number; startClusters: number }
  | { type: "pong"; sentAt: number; at: number }
  | { type: "stopped" }
  | { type: "fatal"; message: string };
