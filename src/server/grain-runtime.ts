/**
 * The grain runtime of one node, built bottom-up (shared-slot ledger, host, router, lease
 * broker) and linked to the parts built on it: readiness and pinning go to the broker,
 * reminders and shared-slot wakes through the router like every other queue call. The
 * composition root (node.ts) builds it once and hands it to the services.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Clock } from "../base/clock.js";
import type { Random } from "../base/random.js";
import { LEASE_RESPONSE_DELIVERIES_MAX, LEASE_RESPONSE_MAX_BYTES, TASK_WAITERS_MAX, WORKER_GONE_AFTER_MS } from "../base/limits.js";
import type { Ownership } from "../cluster/ownership.js";
import { Router } from "../cluster/router.js";
import { GrainHost } from "../grains/runtime/grain-host.js";
import { LeaseBroker } from "../grains/runtime/lease-broker.js";
import { LocalQueueRef, type QueueRef } from "../grains/runtime/queue-ref.js";
import { SharedSlotLedger, type SharedGrants } from "../grains/runtime/shared-slots.js";
import { WorkerRegistry } from "../grains/runtime/worker-registry.js";
import type { Database } from "../storage/database.js";
import type { TaskStore } from "../storage/task-store.js";
import type { ChangelogLink } from "./changelog-link.js";
import { defaultRateLimit, type NodeConfig } from "./config.js";
import { cronCalendar } from "./cron-calendar.js";
import type { NodeMetrics } from "./metrics.js";
import { logTaskFailures } from "./task-failure-log.js";
import { StorageFaultLog } from "./storage-fault-log.js";
import { TaskWaiters } from "./task-waiters.js";

export interface RuntimeEnv {
  config: NodeConfig;
  clock: Clock;
  random: Random;
  metrics: NodeMetrics;
  logger: Logger;
  /** The partitions' changelog (cluster_nats), which records every turn. */
  changelog: ChangelogLink | undefined;
  /** What a call awaits before it answers: the group commit, and the changelog of these queues' partitions. */
  durable: (queues: readonly string[]) => Promise<void>;
}

/** The grain runtime: the host, the router in front of it, the lease broker, the workers it serves, and WaitTask's waiters. */
export interface GrainRuntime {
  host: GrainHost;
  router: Router;
  broker: LeaseBroker;
  waiters: TaskWaiters;
  workers: WorkerRegistry;
  sharedSlots: SharedSlotLedger;
}

/**
 * Builds the grain runtime bottom-up (ledger, host, router, broker), then links the host
 * and the ledger to the parts built on them: readiness and pinning go to the broker;
 * reminders and shared-slot wakes go through the router, like every other queue call.
 */
export function startGrainRuntime(storage: { db: Database; store: TaskStore }, env: RuntimeEnv, ownership: Ownership, grants: SharedGrants | undefined): GrainRuntime {
  const { db, store } = storage;
  const { config, clock, random, metrics, logger, changelog, durable } = env;
  const sharedSlots = new SharedSlotLedger(undefined, grants);
  sharedSlots.restoreLimits(store.slotLimits(""));
  const waiters = new TaskWaiters({ clock, max: TASK_WAITERS_MAX });
  // Waiters hear of an end once it is committed (after a failed commit they read the
  // task as it is and answer "not finished").
  const wakeWaiters = (ids: readonly string[]) => () => waiters.notify(ids);
  const faults = new StorageFaultLog(logger, clock);
  // Queues whose grain memory depends on the open transaction: they wrote in it, or were
  // loaded while it was open (reading its uncommitted rows). Only these can be ahead of
  // disk if it rolls back.
  const touched = new Set<string>();
  const host = new GrainHost({
    sharedSlots, store, clock, random, newId: randomUUID, cron: cronCalendar,
    core: {
      leaseTtlMs: config.leaseTtlMs,
      ...withDefined("defaultRateLimit", defaultRateLimit(config)),
      groupDefaults: { maxSize: config.groupMaxSize, maxDelayMs: config.groupMaxDelayMs, graceMs: config.groupGracePeriodMs },
    },
    idleMs: config.grainIdleTimeoutMs, logger,
    hooks: {
      onEvents: (queue, events) => metrics.record(queue, events),
      // No waiter, nothing to do: a waiter that parks later reads the row itself first.
      onTasksEnded: (_queue, ids) => {
        if (waiters.size > 0) void db.committed().then(wakeWaiters(ids), wakeWaiters(ids));
      },
      onApplied: (queue, effects, nowMs) => {
        touched.add(queue);
        changelog?.record(queue, effects);
        metrics.applied(queue, effects, nowMs);
        logTaskFailures(logger, queue, effects);
      },
    },
    onLifecycle: (queue, event) => {
      if (event === "activated" && db.sqlite.inTransaction) touched.add(queue);
      metrics.grainLifecycle.inc({ queue, event });
    },
    onWriteFailed: (queue, error) => faults.note(error, "a grain's write; its memory is dropped", { queue }),
    onWriteRefused: (queue, error) => {
      metrics.writesRefused.inc({ queue });
      faults.note(error, "calls refused before their turn", { queue });
    },
  });
  // Rows replaced outside the grains (a handoff's load, a catch-up from the log): the memory built on the old ones goes.
  store.onForget((queues) => queues.forEach((q) => host.deactivate(q, "replaced")));
  const router = new Router({
    ownership,
    localRef: (q) => new LocalQueueRef(q, host, { getTask: (id) => store.getTask(id), committed: (queue) => durable([queue]) }), localGrain: (q) => host.get(q),
    queueOfTask: queueOfTaskIn(store),
  });
  // A worker between heartbeats is not gone, however long its heartbeat interval.
  const workers = new WorkerRegistry(clock, () => Math.max(WORKER_GONE_AFTER_MS, 2 * config.heartbeatIntervalMs));
  const broker = new LeaseBroker({
    grainOf: (q) => router.localGrainFor(q), committed: durable, workers, clock, random, waitersMax: config.leaseWaitersMax,
    answerMaxDeliveries: LEASE_RESPONSE_DELIVERIES_MAX, answerMaxBytes: LEASE_RESPONSE_MAX_BYTES,
  });
  /** A call the node makes on its own (no caller to answer): through the router, failures logged. */
  const routed = (queue: string, what: string, call: (ref: QueueRef) => Promise<unknown>): void => {
    try {
      call(router.grainFor(queue)).catch((err: unknown) => logger.warn({ err, queue }, `${what} failed`));
    } catch (err) {
      logger.warn({ err, queue }, `${what} failed`);
    }
  };
  host.link({
    onReady: (queue) => broker.onReady(queue),
    isPinned: (queue) => broker.isPinned(queue),
    onReminder: (queue) => routed(queue, "reminder", (ref) => ref.activate()),
  });
  // A shared rule's slot freed in one queue wakes the queues holding tasks on it.
  sharedSlots.link((queue, slot) => routed(queue, "shared-slot wake", (ref) => ref.wakeSlot(slot)));
  // A grain that neither wrote in the rolled-back transaction nor was loaded during it
  // still holds what disk holds (every earlier transaction committed, or dropped the
  // grains it touched), so only the touched ones go: a full disk must not make every
  // queue reload its backlog (ARCHITECTURE.md, "Group commit").
  db.onCommit(() => touched.clear());
  db.onRollback((error) => {
    const dropped = [...touched];
    touched.clear();
    faults.note(error, `a commit rolled back; memory of ${dropped.length} queue(s) dropped`);
    for (const queue of dropped) host.deactivate(queue, "failed");
  });
  host.start();
  return { host, router, broker, waiters, workers, sharedSlots };
}

/** The queue holding task `id` (undefined: no such task), from the task store's index. */
export const queueOfTaskIn = (store: Pick<TaskStore, "findIds">) => (id: string): string | undefined => store.findIds([id]).get(id)?.queue;

/** `{ [key]: value }` when value is defined, `{}` otherwise (exactOptional-friendly spreads). */
function withDefined<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, V>);
}
