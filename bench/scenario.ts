/**
 * What a scenario is, and what the runner gives it. A scenario is one file in
 * bench/scenarios/ registered in the list in bench/run.ts; it starts what it needs
 * through the context (every daemon, worker process and client it gets is stopped or
 * closed by the runner when the scenario ends, even when it throws) and returns rows.
 */
import type { Client } from "../src/index.js";
import type { AdminClient } from "./admin.js";
import type { Daemon, DaemonOptions } from "./daemon.js";
import type { WorkerConfig } from "./protocol.js";
import type { WorkerProcess } from "./worker-handle.js";

export interface BenchOptions {
  /** Tasks per throughput scenario: enqueue, e2e, rules (default 20,000; keys and batch use a fixed 10,000). */
  tasks: number;
  /** Tasks of the paced pickup-latency scenario (default 2,000). */
  latencyTasks: number;
  /** Enqueue rate of the latency scenario, tasks/s (default 200). */
  latencyRate: number;
  /** Retained (completed) tasks of the retained scenario (default 3,000,000). */
  retainedTasks: number;
  /** How long the retained scenario watches the deletion at most, seconds (default 600). */
  retainedDeleteSeconds: number;
  /** Pending tasks of the footprint, pending, pending-keys and pending-queues scenarios (default 1,000,000). */
  pendingTasks: number;
  /** --set settings passed to every daemon. */
  settings: Record<string, string>;
}

/** A performance target the row is checked against. */
export interface Target {
  metric: string;
  op: ">=" | "<=";
  value: number;
  actual: number;
  unit: string;
}

export interface ResultRow {
  scenario: string;
  tasks: number;
  seconds: number;
  tasksPerSec: number;
  p50Ms?: number;
  p99Ms?: number;
  notes: string;
  targets?: Target[];
  /** Anything else worth keeping in the JSON (latency summaries, CPU use, counts). */
  details?: Record<string, unknown>;
}

export interface ScenarioContext {
  readonly options: BenchOptions;
  /** A line on stderr; at most one a second unless `force`. */
  progress(message: string, force?: boolean): void;
  /** A fresh conveyord with an empty data dir; stopped when the scenario ends. */
  daemon(options?: DaemonOptions): Promise<Daemon>;
  /** A worker process on `daemon`; stopped when the scenario ends. */
  worker(daemon: Daemon, config: Omit<WorkerConfig, "address">): Promise<WorkerProcess>;
  /** An SDK client of `daemon`; closed when the scenario ends. */
  client(daemon: Daemon): Client;
  /** An AdminService/TaskService client of `daemon`; closed when the scenario ends. */
  admin(daemon: Daemon): AdminClient;
  /** Stops a daemon (and what was started on it) before the scenario ends. */
  release(daemon: Daemon): Promise<void>;
}

export interface Scenario {
  /** The name --only selects. */
  name: string;
  description: string;
  run(ctx: ScenarioContext): Promise<ResultRow[]>;
}

export const target = (metric: string, op: Target["op"], value: number, actual: number, unit: string): Target =>
  ({ metric, op, value, actual, unit });

export const targetMet = (t: Target): boolean => (t.op === ">=" ? t.actual >= t.value : t.actual <= t.value);
