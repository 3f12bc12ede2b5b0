/**
 * Prometheus metrics of one node, in a registry of its own (never the global default),
 * so several nodes can run in one process in tests. Labels are bounded: queue names
 * and fixed enums, never a task id or a concurrency key.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CoreEvent, Effect } from "../grains/queue/effects.js";
import type { TaskState } from "../grains/queue/task.js";
import { AttemptTiming } from "./attempt-timing.js";
import { ActivityHistory } from "./activity-history.js";

/** Wait and run time buckets, in seconds: from a few milliseconds to an hour. */
const TASK_SECONDS_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];
/**
 * The depth gauges read storage at most this often: they share one query per scrape,
 * and scrapes closer together than this (several Prometheus servers) reuse it.
 */
export const DEPTH_READ_MIN_INTERVAL_MS = 1_000;

export interface DepthRow {
  queue: string;
  state: TaskState;
  n: number;
  /** When the queue's oldest pending task became ready (pending rows only). */
  oldestReadyAtMs: number | null;
}

export class NodeMetrics {
  readonly registry = new Registry();
  readonly enqueued = new Counter({ name: "conveyor_tasks_enqueued_total", help: "Tasks admitted by enqueue.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly dispatched = new Counter({ name: "conveyor_tasks_dispatched_total", help: "Deliveries handed to workers.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly finished = new Counter({ name: "conveyor_tasks_finished_total", help: "Tasks that reached a final state, by outcome: completed, archived or cancelled (a retry is not final: see conveyor_tasks_retried_total).", labelNames: ["queue", "outcome"] as const, registers: [this.registry] });
  readonly retried = new Counter({ name: "conveyor_tasks_retried_total", help: "Failed attempts (the worker's error or the attempt's timeout) that scheduled a retry.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly waitSeconds = new Histogram({ name: "conveyor_task_wait_seconds", help: "Time from when a task became ready (enqueued, its scheduled time or its retry backoff ended) to its attempt's start.", labelNames: ["queue"] as const, buckets: TASK_SECONDS_BUCKETS, registers: [this.registry] });
  readonly runSeconds = new Histogram({ name: "conveyor_task_run_seconds", help: "Time from an attempt's start to its outcome, by end: completed, retry or archived (attempts that lapsed or were released are not counted).", labelNames: ["queue", "end"] as const, buckets: TASK_SECONDS_BUCKETS, registers: [this.registry] });
  readonly leasesExpired = new Counter({ name: "conveyor_leases_expired_total", help: "Leases reclaimed because their worker stopped heartbeating.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly attemptsTimedOut = new Counter({ name: "conveyor_attempts_timed_out_total", help: "Attempts the node ended at their timeout or deadline (the worker still held them).", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly cancelled = new Counter({ name: "conveyor_tasks_cancelled_total", help: "Tasks cancelled by a concurrency strategy (reason CONCURRENCY_LIMIT).", labelNames: ["queue", "strategy", "reason"] as const, registers: [this.registry] });
  readonly rateLimited = new Counter({ name: "conveyor_rate_limited_total", help: "Dispatch cycles stopped by the queue's rate limit.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly throttled = new Counter({ name: "conveyor_concurrency_throttled_total", help: "Dispatch cycles that held a task back because its concurrency key was saturated.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly scheduleTicks = new Counter({ name: "conveyor_schedule_ticks_total", help: "Schedule ticks handled, by outcome: enqueued, missed (skip policy), running (overlap guard) or refused (by admission).", labelNames: ["queue", "outcome"] as const, registers: [this.registry] });
  readonly grainLifecycle = new Counter({ name: "conveyor_grain_lifecycle_total", help: "Grain activations and deactivations, by event: activated, idle, failed, shutdown, removed (a queue deleted or handed off) or replaced (its rows replaced by a handoff's load or a catch-up from the changelog).", labelNames: ["queue", "event"] as const, registers: [this.registry] });
  readonly writesRefused = new Counter({ name: "conveyor_storage_writes_refused_total", help: "Calls refused before their turn because the data directory's disk is full (DISK_FULL without trying the write; the queue's memory is kept).", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly sessionCalls = new Counter({ name: "conveyor_session_calls_total", help: "Calls that came on session streams (each is also in conveyor_rpc_duration_seconds under its method).", registers: [this.registry] });
  readonly rpcSeconds = new Histogram({ name: "conveyor_rpc_duration_seconds", help: "RPC handling time.", labelNames: ["method", "code"] as const, buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 60], registers: [this.registry] });
  /** Read at scrape time; the composition root points them at the live parts. */
  readonly sources = {
    parkedLeases: () => 0,
    sessions: () => 0,
    activeGrains: () => 0,
    commits: () => 0,
    concurrency: (): Array<{ queue: string; inFlight: number; held: number }> => [],
    depth: (): DepthRow[] => [],
    nowMs: (): number => Date.now(),
  };
  private readonly attempts = new AttemptTiming({
    started: (queue, waitMs) => this.waitSeconds.observe({ queue }, waitMs / 1000),
    ended: (queue, end, runMs) => this.runSeconds.observe({ queue, end }, runMs / 1000),
    retried: (queue) => {
      this.retried.inc({ queue });
      this.activity.add(queue, "retried");
    },
  });
  /** Per-minute counts for the dashboard's charts (GetActivity); the same events as the counters. */
  readonly activity = new ActivityHistory(() => this.sources.nowMs());
  private depthRead: { atMs: number; rows: DepthRow[] } | undefined;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    const sources = this.sources;
    new Gauge({ name: "conveyor_lease_waiters", help: "Lease calls parked waiting for work.", registers: [this.registry],
      collect() { this.set(sources.parkedLeases()); } });
    new Gauge({ name: "conveyor_sessions_open", help: "Session streams open (SessionService: SDK clients' calls, many per stream).", registers: [this.registry],
      collect() { this.set(sources.sessions()); } });
    new Gauge({ name: "conveyor_grains_active", help: "Queue grains in memory.", registers: [this.registry],
      collect() { this.set(sources.activeGrains()); } });
    new Gauge({ name: "conveyor_concurrency_in_flight", help: "Keyed tasks running now, per queue (grains in memory).", labelNames: ["queue"] as const, registers: [this.registry],
      collect() { this.reset(); for (const c of sources.concurrency()) this.set({ queue: c.queue }, c.inFlight); } });
    new Gauge({ name: "conveyor_concurrency_held", help: "Tasks held back because their concurrency key is saturated, per queue.", labelNames: ["queue"] as const, registers: [this.registry],
      collect() { this.reset(); for (const c of sources.concurrency()) this.set({ queue: c.queue }, c.held); } });
    const depth = () => this.readDepth();
    new Gauge({ name: "conveyor_queue_depth", help: "Unfinished tasks per queue and state (scheduled, pending, aggregating, active, retry); finished ones are counted by conveyor_tasks_finished_total.", labelNames: ["queue", "state"] as const, registers: [this.registry],
      collect() { this.reset(); for (const r of depth().rows) this.set({ queue: r.queue, state: r.state }, r.n); } });
    new Gauge({ name: "conveyor_queue_oldest_pending_age_seconds", help: "How long the oldest pending task of each queue with pending tasks has been ready and waiting for a worker.", labelNames: ["queue"] as const, registers: [this.registry],
      collect() {
        this.reset();
        const { atMs, rows } = depth();
        for (const r of rows) if (r.oldestReadyAtMs !== null) this.set({ queue: r.queue }, Math.max(0, atMs - r.oldestReadyAtMs) / 1000);
      } });
    new Counter({ name: "conveyor_sqlite_commits_total", help: "Group-commit transactions since start.", registers: [this.registry],
      collect() { this.reset(); this.inc(sources.commits()); } });
  }

  /** Folds a grain turn's written effects into the wait and run histograms and the retry counter. */
  applied(queue: string, effects: readonly Effect[], nowMs: number): void {
    this.attempts.apply(queue, effects, nowMs);
  }

  private readDepth(): { atMs: number; rows: DepthRow[] } {
    const nowMs = this.sources.nowMs();
    if (!this.depthRead || nowMs - this.depthRead.atMs >= DEPTH_READ_MIN_INTERVAL_MS) this.depthRead = { atMs: nowMs, rows: this.sources.depth() };
    return this.depthRead;
  }

  countEnqueued(queue: string, n: number): void {
    this.enqueued.inc({ queue }, n);
    this.activity.add(queue, "enqueued", n);
  }

  /** Folds a grain turn's events into counters. */
  record(queue: string, events: readonly CoreEvent[]): void {
    for (const e of events) {
      switch (e.kind) {
        case "dispatched": this.dispatched.inc({ queue }, e.count); break;
        case "settled":
          this.finished.inc({ queue, outcome: e.outcome }, e.count);
          if (e.outcome !== "cancelled") this.activity.add(queue, e.outcome, e.count);
          break;
        case "lease_expired": this.leasesExpired.inc({ queue }); break;
        case "attempt_timed_out": this.attemptsTimedOut.inc({ queue }); break;
        case "throttled": this.throttled.inc({ queue }); break;
        case "rate_limited": this.rateLimited.inc({ queue }); break;
        case "cancelled": this.cancelled.inc({ queue, strategy: e.strategy, reason: e.reason }); break;
        case "schedule_tick": this.scheduleTicks.inc({ queue, outcome: e.outcome }); break;
      }
    }
  }
}
