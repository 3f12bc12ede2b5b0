/**
 * Prometheus metrics of one node, in a registry of its own (never the global default),
 * so several nodes can run in one process in tests. Labels are bounded: queue names
 * and fixed enums, never a task id or a concurrency key.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CoreEvent } from "../grains/queue/effects.js";

export class NodeMetrics {
  readonly registry = new Registry();
  readonly enqueued = new Counter({ name: "conveyor_tasks_enqueued_total", help: "Tasks admitted by enqueue.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly dispatched = new Counter({ name: "conveyor_tasks_dispatched_total", help: "Deliveries handed to workers.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly finished = new Counter({ name: "conveyor_tasks_finished_total", help: "Tasks that reached a final state, by outcome: completed, archived or cancelled.", labelNames: ["queue", "outcome"] as const, registers: [this.registry] });
  readonly leasesExpired = new Counter({ name: "conveyor_leases_expired_total", help: "Leases reclaimed because their worker stopped heartbeating.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly attemptsTimedOut = new Counter({ name: "conveyor_attempts_timed_out_total", help: "Attempts the node ended at their timeout or deadline (the worker still held them).", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly cancelled = new Counter({ name: "conveyor_tasks_cancelled_total", help: "Tasks cancelled by a concurrency strategy (reason CONCURRENCY_LIMIT).", labelNames: ["queue", "strategy", "reason"] as const, registers: [this.registry] });
  readonly rateLimited = new Counter({ name: "conveyor_rate_limited_total", help: "Dispatch cycles stopped by the queue's rate limit.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly throttled = new Counter({ name: "conveyor_concurrency_throttled_total", help: "Dispatch cycles that held a task back because its concurrency key was saturated.", labelNames: ["queue"] as const, registers: [this.registry] });
  readonly scheduleTicks = new Counter({ name: "conveyor_schedule_ticks_total", help: "Schedule ticks handled, by outcome: enqueued, missed (skip policy), running (overlap guard) or refused (by admission).", labelNames: ["queue", "outcome"] as const, registers: [this.registry] });
  readonly grainLifecycle = new Counter({ name: "conveyor_grain_lifecycle_total", help: "Grain activations and deactivations, by event: activated, idle, failed or shutdown.", labelNames: ["queue", "event"] as const, registers: [this.registry] });
  readonly rpcSeconds = new Histogram({ name: "conveyor_rpc_duration_seconds", help: "RPC handling time.", labelNames: ["method", "code"] as const, buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 60], registers: [this.registry] });
  /** Read at scrape time; the composition root points them at the live parts. */
  readonly sources = {
    parkedLeases: () => 0,
    activeGrains: () => 0,
    commits: () => 0,
    concurrency: (): Array<{ queue: string; inFlight: number; held: number }> => [],
  };

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    const sources = this.sources;
    new Gauge({ name: "conveyor_lease_waiters", help: "Lease calls parked waiting for work.", registers: [this.registry],
      collect() { this.set(sources.parkedLeases()); } });
    new Gauge({ name: "conveyor_grains_active", help: "Queue grains in memory.", registers: [this.registry],
      collect() { this.set(sources.activeGrains()); } });
    new Gauge({ name: "conveyor_concurrency_in_flight", help: "Keyed tasks running now, per queue (grains in memory).", labelNames: ["queue"] as const, registers: [this.registry],
      collect() { this.reset(); for (const c of sources.concurrency()) this.set({ queue: c.queue }, c.inFlight); } });
    new Gauge({ name: "conveyor_concurrency_held", help: "Tasks held back because their concurrency key is saturated, per queue.", labelNames: ["queue"] as const, registers: [this.registry],
      collect() { this.reset(); for (const c of sources.concurrency()) this.set({ queue: c.queue }, c.held); } });
    new Counter({ name: "conveyor_sqlite_commits_total", help: "Group-commit transactions since start.", registers: [this.registry],
      collect() { this.reset(); this.inc(sources.commits()); } });
  }

  /** Folds a grain turn's events into counters. */
  record(queue: string, events: readonly CoreEvent[]): void {
    for (const e of events) {
      switch (e.kind) {
        case "dispatched": this.dispatched.inc({ queue }, e.count); break;
        case "settled": this.finished.inc({ queue, outcome: e.outcome }, e.count); break;
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
