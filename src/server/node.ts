/**
 * The composition root of one conveyor node: the only place that wires storage, the
 * grain runtime, the ring and the gRPC/HTTP surfaces together.
 */
import * as grpc from "@grpc/grpc-js";
import { randomUUID } from "node:crypto";
import type { Server as HttpServer } from "node:http";
import type { Logger } from "pino";
import { systemClock, type Clock } from "../base/clock.js";
import { setLongTimeout } from "../base/long-timer.js";
import { systemRandom, type Random } from "../base/random.js";
import { LEASE_RESPONSE_DELIVERIES_MAX, LEASE_RESPONSE_MAX_BYTES, REQUEST_MAX_BYTES } from "../base/limits.js";
import { Ring } from "../cluster/ring.js";
import { Router } from "../cluster/router.js";
import { GrainHost } from "../grains/runtime/grain-host.js";
import { LocalQueueRef, type QueueRef } from "../grains/runtime/queue-ref.js";
import { SharedSlotLedger } from "../grains/runtime/shared-slots.js";
import { SqliteRuleStore } from "../storage/rule-store.js";
import { RuleRegistry } from "./rules/rule-registry.js";
import { LeaseBroker } from "../grains/runtime/lease-broker.js";
import type { Database } from "../storage/database.js";
import { openDataDir, type DataDir } from "../storage/data-dir.js";
import { TaskStore } from "../storage/task-store.js";
import { AdminQueries } from "../storage/admin-queries.js";
import { TaskService } from "../gen/conveyor/v1/task_service_pb.js";
import { WorkerService } from "../gen/conveyor/v1/worker_service_pb.js";
import { AdminService } from "../gen/conveyor/v1/admin_service_pb.js";
import { addUnaryService } from "../rpc/server.js";
import { addReflection } from "../rpc/reflection.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import { defaultRateLimit, type NodeConfig } from "./config.js";
import { NodeMetrics } from "./metrics.js";
import { taskAccess } from "./task-access.js";
import { taskService } from "./task-service.js";
import { workerService } from "./worker-service.js";
import { adminService } from "./admin-service.js";
import { createHttpServer } from "./http.js";
import { jsonApiRoute, jsonService } from "./json-api.js";
import { findWebRoot, staticRoute } from "./static-files.js";

export interface NodeDeps {
  config: NodeConfig;
  logger: Logger;
  clock?: Clock;
  random?: Random;
}

export class ConveyorNode {
  private constructor(
    readonly grpcAddress: string,
    readonly httpAddress: string,
    private readonly parts: {
      grpcServer: grpc.Server; httpServer: HttpServer; dataDir: DataDir; host: GrainHost; broker: LeaseBroker;
      stopJanitor: () => void; logger: Logger; config: NodeConfig;
    },
  ) {}

  static async start(deps: NodeDeps): Promise<ConveyorNode> {
    const { config } = deps;
    const clock = deps.clock ?? systemClock;
    const random = deps.random ?? systemRandom;
    // Locks the directory and checks its identity; refuses (DataDirError) rather than start empty.
    const dataDir = openDataDir({ dir: config.dataDir, synchronous: config.sqliteSynchronous });
    try {
      return await ConveyorNode.startOn(dataDir, deps, clock, random);
    } catch (error) {
      dataDir.close();
      throw error;
    }
  }

  private static async startOn(dataDir: DataDir, deps: NodeDeps, clock: Clock, random: Random): Promise<ConveyorNode> {
    const { config, logger } = deps;
    const metrics = new NodeMetrics();
    const storage = openStorage(dataDir.db, config, clock);
    const runtime = startGrainRuntime(storage, { config, clock, random, metrics, logger });
    // Queues with unfinished tasks come back at start (their timers, their leases' lapses).
    await Promise.all(storage.queries.queuesWithUnfinishedTasks().map((queue) => runtime.router.grainFor(queue).activate()));
    const stopJanitor = startJanitor(storage.queries, clock, config.janitorIntervalMs, logger);
    const services = buildServices(storage, runtime, { config, clock, metrics });
    const transports = await startTransports(services, runtime, { config, metrics, logger, db: storage.db });
    logger.info({
      grpc: transports.grpcAddress, http: transports.httpAddress, dataDir: dataDir.dir, identity: dataDir.identity.id, opened: dataDir.opened,
    }, "conveyord listening");
    return new ConveyorNode(transports.grpcAddress, transports.httpAddress, {
      grpcServer: transports.grpcServer, httpServer: transports.httpServer, dataDir, host: runtime.host, broker: runtime.broker,
      stopJanitor, logger, config,
    });
  }

  /**
   * Graceful stop: refuse new calls, end parked Lease calls empty, let in-flight calls
   * finish (up to the shutdown grace), commit, and close the data file.
   */
  async stop(): Promise<void> {
    const { grpcServer, httpServer, dataDir, host, broker, stopJanitor, logger, config } = this.parts;
    stopJanitor();
    broker.releaseAll();
    await new Promise<void>((resolve) => {
      const cancelForce = setLongTimeout(() => {
        grpcServer.forceShutdown();
        resolve();
      }, config.shutdownGraceMs);
      grpcServer.tryShutdown(() => {
        cancelForce();
        resolve();
      });
    });
    await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    httpServer.closeAllConnections();
    host.stop();
    dataDir.close();
    logger.info("conveyord stopped");
  }
}

/** The node's storage: the data file and what reads and writes it. */
interface Storage {
  db: Database;
  store: TaskStore;
  queries: AdminQueries;
  rules: RuleRegistry;
}

function openStorage(db: Database, config: NodeConfig, clock: Clock): Storage {
  const rules = new RuleRegistry(new SqliteRuleStore(db), () => clock.nowMs());
  rules.load();
  return { db, store: new TaskStore(db, { deadRetentionMs: config.deadRetentionMs }), queries: new AdminQueries(db), rules };
}

interface RuntimeEnv {
  config: NodeConfig;
  clock: Clock;
  random: Random;
  metrics: NodeMetrics;
  logger: Logger;
}

/** The grain runtime: the host, the router in front of it, and the lease broker. */
interface GrainRuntime {
  host: GrainHost;
  router: Router;
  broker: LeaseBroker;
}

/**
 * Builds the grain runtime bottom-up (ledger, host, router, broker), then links the host
 * and the ledger to the parts built on them: readiness and pinning go to the broker;
 * reminders and shared-slot wakes go through the router, like every other queue call.
 */
function startGrainRuntime(storage: Storage, env: RuntimeEnv): GrainRuntime {
  const { db, store } = storage;
  const { config, clock, random, metrics, logger } = env;
  const sharedSlots = new SharedSlotLedger();
  sharedSlots.restoreLimits(store.slotLimits(""));
  const host = new GrainHost({
    sharedSlots, store, clock, random, newId: randomUUID,
    core: {
      leaseTtlMs: config.leaseTtlMs,
      ...withDefined("defaultRateLimit", defaultRateLimit(config)),
      groupDefaults: { maxSize: config.groupMaxSize, maxDelayMs: config.groupMaxDelayMs, graceMs: config.groupGracePeriodMs },
      groupSweepIntervalMs: config.groupSweepIntervalMs,
    },
    idleMs: config.grainIdleTimeoutMs, logger,
    hooks: { onEvents: (queue, events) => metrics.record(queue, events) },
    onLifecycle: (queue, event) => metrics.grainLifecycle.inc({ queue, event }),
  });
  const ring = new Ring([config.nodeId], 1);
  const router = new Router({
    selfId: config.nodeId, ring: () => ring,
    localRef: (q) => new LocalQueueRef(q, host, store), localGrain: (q) => host.get(q),
    queueOfTask: (id) => store.findIds([id]).get(id)?.queue,
  });
  const broker = new LeaseBroker({
    grainOf: (q) => router.localGrainFor(q), committed: () => db.committed(), clock, random, waitersMax: config.leaseWaitersMax,
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
  db.onRollback((error) => {
    logger.error({ err: error }, "storage transaction rolled back; dropping grain memory");
    host.deactivateAll("failed");
  });
  host.start();
  return { host, router, broker };
}

interface Services {
  tasks: UnaryImpl<typeof TaskService>;
  workers: UnaryImpl<typeof WorkerService>;
  admin: UnaryImpl<typeof AdminService>;
}

/** One implementation per service, each given only what it uses. */
function buildServices(storage: Storage, runtime: GrainRuntime, env: Pick<RuntimeEnv, "config" | "clock" | "metrics">): Services {
  const { db, store, queries, rules } = storage;
  const { host, router, broker } = runtime;
  const { config, clock, metrics } = env;
  const committed = () => db.committed();
  const tasksById = taskAccess(router, store);
  return {
    tasks: taskService({
      ...tasksById, router, rules, metrics, clock, newTaskId: randomUUID,
      taskDefaults: {
        maxRetry: config.defaultMaxRetry, retentionMs: config.retentionMs,
        backoffBaseMs: config.retryBackoffBaseMs, backoffMaxMs: config.retryBackoffMaxMs,
      },
    }),
    workers: workerService({ router, broker, rules, config, committed }),
    admin: adminService({
      ...tasksById, router, queries, rules, broker, config, startedAtMs: clock.nowMs(), committed,
      activeQueues: () => host.activeQueues(), queueExists: (queue) => store.queueExists(queue),
    }),
  };
}

interface Transports {
  grpcServer: grpc.Server;
  grpcAddress: string;
  httpServer: HttpServer;
  httpAddress: string;
}

/** The gRPC port (every service, reflection) and the HTTP port (metrics, health, dashboard). */
async function startTransports(
  services: Services, runtime: GrainRuntime, env: { config: NodeConfig; metrics: NodeMetrics; logger: Logger; db: Database },
): Promise<Transports> {
  const { config, metrics, logger, db } = env;
  const { host, broker } = runtime;
  const grpcServer = new grpc.Server({
    "grpc.keepalive_time_ms": 30_000,
    "grpc.keepalive_timeout_ms": 10_000,
    // A request is decoded in one piece before any handler runs: its size bounds that work.
    "grpc.max_receive_message_length": REQUEST_MAX_BYTES,
  });
  const onInternal = (method: string, error: unknown) => logger.error({ method, err: error }, "rpc failed with an internal error");
  const observe = (method: string, code: grpc.status, seconds: number) =>
    metrics.rpcSeconds.observe({ method, code: grpc.status[code] ?? String(code) }, seconds);
  addUnaryService(grpcServer, TaskService, services.tasks, onInternal, observe);
  addUnaryService(grpcServer, WorkerService, services.workers, onInternal, observe);
  addUnaryService(grpcServer, AdminService, services.admin, onInternal, observe);
  // grpcurl and `buf curl` discover the services and their messages from the node itself.
  addReflection(grpcServer, [TaskService, WorkerService, AdminService]);
  const grpcPort = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync(config.listen, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))));

  const health = () => ({ node: config.nodeId, grains: host.activeQueues().length, parkedLeases: broker.parked });
  // Dashboard: the JSON API calls the same (stateless) service implementations as gRPC.
  const dashboard = [
    jsonApiRoute([jsonService(AdminService, services.admin), jsonService(TaskService, services.tasks)], { onInternal }),
    staticRoute(findWebRoot()),
  ];
  const httpServer = createHttpServer(metrics, health, dashboard);
  const [httpHost, httpPortText] = splitHostPort(config.http);
  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(Number(httpPortText), httpHost, () => resolve());
  });
  const httpAddr = httpServer.address();
  const httpPort = typeof httpAddr === "object" && httpAddr ? httpAddr.port : Number(httpPortText);
  metrics.sources.commits = () => db.commits;
  metrics.sources.parkedLeases = () => broker.parked;
  metrics.sources.activeGrains = () => host.activeQueues().length;
  metrics.sources.concurrency = () => host.activeQueues().map((queue) => {
    const stats = host.peek(queue)!.stats();
    return { queue, inFlight: stats.inflightKeyed, held: stats.held };
  });
  return {
    grpcServer, grpcAddress: `${splitHostPort(config.listen)[0]}:${grpcPort}`,
    httpServer, httpAddress: `${httpHost}:${httpPort}`,
  };
}

/** Rows one janitor run deletes at most (one transaction); a larger backlog drains over several runs. */
const JANITOR_BATCH_MAX_ROWS = 5_000;

function startJanitor(queries: AdminQueries, clock: Clock, intervalMs: number, logger: Logger): () => void {
  let cancel = () => {};
  const run = () => {
    try {
      // Bounded batches keep each transaction short; a backlog drains over several runs.
      const purged = queries.purgeFinished(clock.nowMs(), JANITOR_BATCH_MAX_ROWS);
      if (purged > 0) logger.debug({ purged }, "purged finished tasks past retention");
    } catch (err) {
      logger.error({ err }, "retention purge failed");
    }
    cancel = clock.setTimer(intervalMs, run);
  };
  cancel = clock.setTimer(intervalMs, run);
  return () => cancel();
}

/** `{ [key]: value }` when value is defined, `{}` otherwise (exactOptional-friendly spreads). */
function withDefined<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, V>);
}

export function splitHostPort(address: string): [string, string] {
  const i = address.lastIndexOf(":");
  if (i <= 0) throw new Error(`expected HOST:PORT, got ${JSON.stringify(address)}`);
  return [address.slice(0, i), address.slice(i + 1)];
}
