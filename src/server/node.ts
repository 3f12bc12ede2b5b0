/**
 * The composition root of one conveyor node: the only place that wires storage, the
 * grain runtime, the ring and the gRPC/HTTP surfaces together.
 */
import * as grpc from "@grpc/grpc-js";
import type { Server as HttpServer } from "node:http";
import type { Server as TlsServer } from "node:tls";
import type { Logger } from "pino";
import { systemClock, type Clock } from "../base/clock.js";
import { setLongTimeout } from "../base/long-timer.js";
import { systemRandom, type Random } from "../base/random.js";
import { REQUEST_MAX_BYTES } from "../base/limits.js";
import { parseEndpoints } from "../cluster/start-membership.js";
import { OwnershipLink, SoloOwnership } from "../cluster/ownership.js";
import { partitionOf } from "../cluster/partitions.js";
import { mintTaskId } from "../cluster/task-ids.js";
import { Peers } from "./forwarding/peers.js";
import { forwardingService, type ForwarderDeps } from "./forwarding/forwarder.js";
import { runClusterMember } from "./cluster-node.js";
import { joinCluster, type BoundPorts } from "./join-cluster.js";
import { ClusterMetrics, type ClusterMetricSources } from "./cluster-metrics.js";
import { clusterService } from "./handoff/cluster-service.js";
import { ClusterService } from "../gen/conveyor/v1/cluster_service_pb.js";
import { LogPositions } from "../storage/log-positions.js";
import { queueOfTaskIn, startGrainRuntime, type GrainRuntime, type RuntimeEnv } from "./grain-runtime.js";
import { PartitionRows } from "../storage/partition-rows.js";
import { clusterStatusHandler, MembershipLink } from "./cluster-status.js";
import { GrainHost } from "../grains/runtime/grain-host.js";
import { openChangelog, type ChangelogLink } from "./changelog-link.js";
import { NodeGrants } from "../grains/ledger/node-grants.js";
import { LedgerHost } from "./ledger/ledger-host.js";
import { GrantExchange } from "./ledger/grant-exchange.js";
import { SqliteRuleStore } from "../storage/rule-store.js";
import { RuleRegistry } from "./rules/rule-registry.js";
import { ClusterRules } from "./rules/cluster-rules.js";
import { localRuleWriter, type RuleWriter } from "./rules/rule-writer.js";
import { LeaseBroker } from "../grains/runtime/lease-broker.js";
import type { Database } from "../storage/database.js";
import { openDataDir, type DataDir } from "../storage/data-dir.js";
import { TaskStore } from "../storage/task-store.js";
import { AdminQueries } from "../storage/admin-queries.js";
import { TaskService } from "../gen/conveyor/v1/task_service_pb.js";
import { WorkerService } from "../gen/conveyor/v1/worker_service_pb.js";
import { AdminService } from "../gen/conveyor/v1/admin_service_pb.js";
import { admissionInterceptor } from "../rpc/admission.js";
import { addUnaryService } from "../rpc/server.js";
import { addSessionService, type Sessions } from "../rpc/session-server.js";
import { addReflection } from "../rpc/reflection.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import type { NodeConfig } from "./config.js";
import { NodeMetrics } from "./metrics.js";
import { taskAccess } from "./task-access.js";
import { taskService } from "./task-service.js";
import { TaskWaiters } from "./task-waiters.js";
import { workerService } from "./worker-service.js";
import { adminService } from "./admin-service.js";
import { withOperatorLog } from "./operator-log.js";
import { scheduleRpcs } from "./schedule-rpcs.js";
import { PlacementLink, placementRpcs } from "./placement-rpcs.js";
import type { TaskDefaults } from "./validate.js";
import { createHttpServer } from "./http.js";
import { jsonApiRoute, jsonService } from "./json-api.js";
import { findWebRoot, staticRoute } from "./static-files.js";
import { checkPortFree, listenFailure } from "./port-check.js";
import { Janitor } from "./janitor.js";
import { loadSecurity, NodeSecurity, type LoadedSecurity, type SecurityOptions } from "./security/node-security.js";
import { whoamiRoute } from "./security/whoami-route.js";

export interface NodeDeps {
  config: NodeConfig;
  logger: Logger;
  clock?: Clock;
  random?: Random;
  security?: SecurityOptions;
}

export class ConveyorNode {
  private constructor(
    readonly grpcAddress: string,
    readonly httpAddress: string,
    private readonly parts: {
      grpcServer: grpc.Server; sessions: Sessions; httpServer: HttpServer; dataDir: DataDir; host: GrainHost; broker: LeaseBroker; waiters: TaskWaiters;
      stopJanitor: () => void; logger: Logger; config: NodeConfig; security: NodeSecurity; leaveCluster: () => Promise<void>;
    },
  ) {}

  static async start(deps: NodeDeps): Promise<ConveyorNode> {
    const { config } = deps;
    const clock = deps.clock ?? systemClock;
    const random = deps.random ?? systemRandom;
    // Before the data directory: a node that must not start touches nothing.
    const loaded = loadSecurity(config, deps.security ?? {}, deps.logger);
    // Locks the directory and checks its identity; refuses (DataDirError) rather than start empty.
    const dataDir = openDataDir({
      dir: config.dataDir, synchronous: config.sqliteSynchronous, checkpoints: config.sqliteCheckpoints,
      onCheckpointFailure: (error, fallback) => deps.logger.warn({ err: error.message }, fallback
        ? "the WAL checkpoint thread stopped; SQLite checkpoints inside commits again (slower, as safe)"
        : "a background WAL checkpoint failed (the WAL grows until one succeeds; retrying)"),
    });
    // The start's own waits (the changelog's and the membership's retries) pause on the
    // clock's timers, which never keep a process alive, and until the ports are bound
    // nothing else may: a retry while NATS or etcd was slow let the process end, exit code
    // 0 and no word (a restarted cluster node in CI). Held until the start ends either way.
    const starting = setInterval(() => {}, 60_000);
    try {
      return await ConveyorNode.startOn(dataDir, deps, clock, random, loaded);
    } catch (error) {
      dataDir.close();
      throw error;
    } finally {
      clearInterval(starting);
    }
  }

  private static async startOn(dataDir: DataDir, deps: NodeDeps, clock: Clock, random: Random, loaded: LoadedSecurity): Promise<ConveyorNode> {
    const { config, logger } = deps;
    const metrics = new NodeMetrics();
    const storage = openStorage(dataDir.db, config, clock);
    const clustered = parseEndpoints(config.clusterEtcd).length > 0;
    const partitionOfQueue = (queue: string) => partitionOf(queue, config.clusterPartitions);
    // Cluster part 2: every committed turn also on its partition's changelog (cluster_nats).
    const changelog = clustered
      ? await openChangelog({
        urls: config.clusterNats, nodeId: config.nodeId, partitionOf: partitionOfQueue, db: storage.db,
        store: storage.store, rows: storage.rows, positions: storage.positions, snapshotEvery: config.clusterSnapshotEvery, clock, logger, registry: metrics.registry,
      })
      : undefined;
    const durable = changelog ? changelog.durable : () => storage.db.committed();
    // A single node holds every partition from the start; a cluster member holds what it claims once it has joined.
    const ownership = clustered
      ? new OwnershipLink(config.nodeId, config.clusterPartitions, partitionOfQueue)
      : new SoloOwnership(config.nodeId, config.clusterPartitions, partitionOfQueue);
    // A cluster member admits tasks on shared rules up to the grants of the rules' ledgers.
    const grants = clustered ? new NodeGrants() : undefined;
    let grantsWanted = () => {};
    const runtime = startGrainRuntime(storage, { config, clock, random, metrics, logger, changelog, durable }, ownership,
      grants ? { grants, nowMs: () => clock.nowMs(), onWaiting: () => grantsWanted() } : undefined);
    // Grains of a partition whose rows the changelog rebuilds, or whose log this node lost, go from memory.
    changelog?.linkGrains((p) => {
      for (const queue of runtime.host.activeQueues()) if (partitionOfQueue(queue) === p) runtime.host.retire(queue);
    });
    const ledgers = new LedgerHost(ownership);
    // Queues with unfinished tasks come back at start (their timers, their leases' lapses).
    // So do queues with unpaused schedules (their ticks, missed ones included).
    const startQueues = new Set([...storage.queries.queuesWithUnfinishedTasks(), ...storage.store.schedules.queuesWithSchedules()]);
    const activate = (queues: Iterable<string>) => Promise.all([...queues].map((queue) => runtime.router.grainFor(queue).activate()));
    if (!clustered) await activate(startQueues);
    const janitor = new Janitor({
      purge: (nowMs, limit) => storage.queries.purgeFinished(nowMs, limit), committed: () => storage.db.committed(),
      clock, intervalMs: config.janitorIntervalMs, logger,
    });
    janitor.start();
    const stopJanitor = () => janitor.stop();
    const membership = new MembershipLink(config.nodeId, clustered);
    const placement = new PlacementLink(config.clusterPartitions);
    // A cluster member's task-type rules follow the cluster's set in etcd (read before it joins); a single node's are its own.
    const clusterRules = clustered
      ? new ClusterRules({ registry: storage.rules, clock, logger, rewatchMs: Math.floor(config.clusterMemberTtlMs / 3), catchUpMs: RULES_CATCH_UP_MS })
      : undefined;
    const ruleWriter = clusterRules ?? localRuleWriter(storage.rules);
    const services = buildServices(storage, runtime, { config, clock, metrics, logger, changelog, membership, placement, ruleWriter });
    const { authn, tls } = loaded;
    const security = new NodeSecurity(loaded, { registry: metrics.registry, logger, config, queueOfTask: queueOfTaskIn(storage.store) });
    // Every node-to-node call presents this node's cluster secret (security/cluster-secret.ts).
    const peers = new Peers(security.presentedClusterSecret, security.peerCredentials);
    let others: ForwarderDeps["others"] = () => [];
    let clusterSources: ClusterMetricSources = {
      members: () => ({ joining: 0, active: 1, draining: 0 }), ringVersion: () => 1, partitionsHeld: () => config.clusterPartitions,
    };
    const clusterMetrics = new ClusterMetrics(metrics.registry, () => clusterSources);
    const forwarding: ForwarderDeps = {
      ownership, peers, others: () => others(), handoffWaitMs: config.clusterHandoffWaitMs,
      ...(ownership instanceof OwnershipLink ? { joined: ownership.linked } : {}),
      observe: { forwarded: (method) => clusterMetrics.forwarded.inc({ method }), wrongOwner: (method) => clusterMetrics.wrongOwner.inc({ method }) },
    };
    const transports = await startTransports(services, runtime, { config, metrics, logger, db: storage.db, queries: storage.queries, clock, security, forwarding, rows: storage.rows, positions: storage.positions, store: storage.store, ledgers, changelog });
    const joined = await joinCluster(config, transports, dataDir, logger, membership, clusterRules, changelog?.gate);
    placement.control = joined.placement;
    let drain = async () => {};
    let stopGrants = async () => {};
    if (joined.owners && joined.member && ownership instanceof OwnershipLink && grants) {
      const owners = joined.owners;
      ownership.link(owners);
      others = () => owners.others();
      const exchange = new GrantExchange({ ownership, grants, shared: runtime.sharedSlots, host: ledgers, peers, others, clock, logger });
      grantsWanted = () => exchange.soon();
      exchange.start();
      stopGrants = () => exchange.farewell();
      const member = joined.member;
      clusterSources = {
        members: () => {
          const counts = { joining: 0, active: 0, draining: 0 };
          for (const m of member.members().values()) counts[m.record.state] += 1;
          return counts;
        },
        ringVersion: () => member.ringVersion, partitionsHeld: () => owners.held().length,
      };
      // Warm standbys follow the logs of the partitions the placement gives this node to stand by for.
      const refreshStandbys = changelog?.startStandbys(owners, config.clusterStandbys) ?? (() => {});
      owners.onChange(refreshStandbys);
      member.onChange(refreshStandbys);
      ({ drain } = await runClusterMember({
        onClaimed: () => clusterMetrics.claims.inc(),
        onTakeover: (p, from) => {
          clusterMetrics.failovers.inc();
          logger.warn({ partition: p, from }, "took over a partition whose holder is gone, from its changelog");
        },
        onHandedOff: (r) => {
          clusterMetrics.handoffs.inc({ cause: r.cause, outcome: "ok" });
          clusterMetrics.handoffSeconds.observe({ cause: r.cause }, r.ms / 1000);
        },
        onHandoffFailed: (cause) => clusterMetrics.handoffs.inc({ cause, outcome: "failed" }),
        member: joined.member, owners, rows: storage.rows, peers, clock, logger,
        queuesToActivate: () => new Set([...storage.queries.queuesWithUnfinishedTasks(), ...storage.store.schedules.queuesWithSchedules()]),
        activate, releaseParked: (moving) => runtime.broker.releaseQueues(moving), refuseParked: (error) => runtime.broker.refuseAll(error), retireGrain: (queue) => runtime.host.retire(queue),
        committed: (p) => durable(storage.rows.queueNames().filter((q) => partitionOfQueue(q) === p)), drainTimeoutMs: config.shutdownGraceMs,
        logSeq: (p) => changelog?.lastSeq(p) ?? 0,
      }));
    }
    const leaveCluster = async () => {
      await drain();
      await clusterRules?.stop();
      await stopGrants();
      await joined.leave();
      await changelog?.close();
      peers.close();
    };
    // Started: from here on a changed TLS or auth file is reloaded (node.stop ends the watch).
    security.watchFiles();
    logger.info({
      grpc: transports.grpcAddress, http: transports.httpAddress, dataDir: dataDir.dir, identity: dataDir.identity.id, opened: dataDir.opened,
      auth: authn.enabled ? "on" : "off", tls: tls ? (tls.mutual ? "mutual" : "on") : "off",
    }, "conveyord listening");
    return new ConveyorNode(transports.grpcAddress, transports.httpAddress, {
      grpcServer: transports.grpcServer, sessions: transports.sessions, httpServer: transports.httpServer, dataDir, host: runtime.host, broker: runtime.broker, waiters: runtime.waiters,
      stopJanitor, logger, config, security, leaveCluster,
    });
  }

  /** SIGHUP: read the TLS files and the auth file again; what fails to load keeps what is in force (and the error is logged). */
  reloadSecurity(): void {
    this.parts.security.reload("SIGHUP");
  }

  /**
   * Graceful stop: refuse new calls, end parked Lease calls empty and WaitTask calls with
   * the task as it is, let in-flight calls
   * finish (up to the shutdown grace), commit, and close the data file.
   */
  async stop(): Promise<void> {
    const { grpcServer, sessions, httpServer, dataDir, host, broker, waiters, stopJanitor, logger, config, security, leaveCluster } = this.parts;
    security.close();
    // First leave the cluster: the lease is revoked, so peers see this node gone at once.
    await leaveCluster();
    stopJanitor();
    // Sessions take no more calls and end once theirs are answered (the shutdown below waits
    // for their streams): a call sent after this is never run, and the SDK sends it again.
    void sessions.close();
    broker.releaseAll();
    waiters.releaseAll();
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

/**
 * How long a rules write that etcd accepted waits for this node's watch to bring it
 * (normally milliseconds) before it reads the rule set instead.
 */
const RULES_CATCH_UP_MS = 2_000;

/** The node's storage: the data file and what reads and writes it. */
interface Storage {
  db: Database;
  /** A partition's rows, for handoffs. */
  rows: PartitionRows;
  /** Where this node's rows of each partition stand on its changelog (cluster_nats). */
  positions: LogPositions;
  store: TaskStore;
  queries: AdminQueries;
  rules: RuleRegistry;
}

function openStorage(db: Database, config: NodeConfig, clock: Clock): Storage {
  const rules = new RuleRegistry(new SqliteRuleStore(db), () => clock.nowMs());
  rules.load();
  return { db, rows: new PartitionRows(db), positions: new LogPositions(db), store: new TaskStore(db, { deadRetentionMs: config.deadRetentionMs }), queries: new AdminQueries(db), rules };
}

interface Services {
  tasks: UnaryImpl<typeof TaskService>;
  workers: UnaryImpl<typeof WorkerService>;
  admin: UnaryImpl<typeof AdminService>;
}

/** One implementation per service, each given only what it uses. */
function buildServices(
  storage: Storage, runtime: GrainRuntime,
  env: Pick<RuntimeEnv, "config" | "clock" | "metrics" | "logger" | "changelog"> & { membership: MembershipLink; placement: PlacementLink; ruleWriter: RuleWriter },
): Services {
  const { db, store, queries, rules } = storage;
  const { host, router, broker, waiters, workers } = runtime;
  const { config, clock, metrics, logger, ruleWriter } = env;
  const committed = () => db.committed();
  const tasksById = taskAccess(router, store);
  return {
    tasks: taskService({
      ...tasksById, router, rules, metrics, clock, newTaskId: (queue) => mintTaskId(router.ownership.partitionOf(queue), clock.nowMs()), waiters,
      taskDefaults: taskDefaultsOf(config),
    }),
    workers: workerService({ router, broker, workers, rules, ruleWriter, config, committed, attemptEndedUnder: (taskId, leaseId) => store.attemptEndedUnder(taskId, leaseId) }),
    // Operator actions are logged here, so gRPC and the dashboard's JSON API log alike.
    admin: withOperatorLog({
      ...adminService({
        ...tasksById, router, queries, rules, ruleWriter, broker, workers, activity: metrics.activity, config, startedAtMs: clock.nowMs(), committed,
        activeQueues: () => host.activeQueues(), clusterStatus: clusterStatusHandler(env.membership, env.changelog),
        queueExists: (queue) => store.queueExists(queue),
      }),
      ...scheduleRpcs({ router, schedules: store.schedules, rules, taskDefaults: taskDefaultsOf(config), clock }),
      ...placementRpcs(env.placement),
    }, logger),
  };
}

/** The server's defaults for what a task spec leaves unset. */
function taskDefaultsOf(config: NodeConfig): TaskDefaults {
  return {
    maxRetry: config.defaultMaxRetry, retentionMs: config.retentionMs,
    backoffBaseMs: config.retryBackoffBaseMs, backoffMaxMs: config.retryBackoffMaxMs,
  };
}

type Transports = BoundPorts & { sessions: Sessions };

/**
 * The gRPC port (every service, reflection) and the HTTP port (metrics, health, dashboard).
 * Both serve the guarded implementations (security/guard.ts), never the bare ones.
 */
async function startTransports(
  bare: Services, runtime: GrainRuntime,
  env: {
    config: NodeConfig; metrics: NodeMetrics; logger: Logger; db: Database; queries: Pick<AdminQueries, "depth">; clock: Clock; security: NodeSecurity;
    forwarding: ForwarderDeps; rows: PartitionRows; positions: LogPositions; store: TaskStore; ledgers: LedgerHost; changelog: ChangelogLink | undefined;
  },
): Promise<Transports> {
  const { config, metrics, logger, db, queries, clock, security, forwarding } = env;
  // Guard first (who may call what), then route (here or the owner), then the bare service.
  const services: Services = {
    tasks: security.guard(TaskService, forwardingService(TaskService, bare.tasks, forwarding)),
    workers: security.guard(WorkerService, forwardingService(WorkerService, bare.workers, forwarding)),
    admin: security.guard(AdminService, forwardingService(AdminService, bare.admin, forwarding)),
  };
  const { host, broker } = runtime;
  const grpcServer = new grpc.Server({
    "grpc.keepalive_time_ms": 30_000,
    "grpc.keepalive_timeout_ms": 10_000,
    // A request is decoded in one piece before any handler runs: its size bounds that work.
    "grpc.max_receive_message_length": REQUEST_MAX_BYTES,
    // Credentials are checked on the headers, before a message is read or decoded (security/admission.ts).
    interceptors: [admissionInterceptor(security.grpcAdmission())],
  });
  const onInternal = (method: string, error: unknown) => logger.error({ method, err: error }, "rpc failed with an internal error");
  const observe = (method: string, code: grpc.status, seconds: number) =>
    metrics.rpcSeconds.observe({ method, code: grpc.status[code] ?? String(code) }, seconds);
  addUnaryService(grpcServer, TaskService, services.tasks, onInternal, observe);
  addUnaryService(grpcServer, WorkerService, services.workers, onInternal, observe);
  addUnaryService(grpcServer, AdminService, services.admin, onInternal, observe);
  // The SDK's calls of TaskService and WorkerService, many on one stream (rpc/session-server.ts).
  const sessions = addSessionService(grpcServer, [{ service: TaskService, impl: services.tasks }, { service: WorkerService, impl: services.workers }], { onInternal, observe, carried: () => metrics.sessionCalls.inc() });
  // Node-to-node (handoffs): served here, never forwarded; and only by a cluster member
  // (a node alone answers UNIMPLEMENTED: nobody may hand it rows).
  if (parseEndpoints(config.clusterEtcd).length > 0) addUnaryService(grpcServer, ClusterService,
    security.guard(ClusterService, clusterService({
      rows: env.rows, positions: env.positions, store: env.store, holds: (p) => forwarding.ownership.holds(p), routeOf: (p) => forwarding.ownership.route(p),
      partitions: config.clusterPartitions, partitionOf: (q) => partitionOf(q, config.clusterPartitions),
      ...(env.changelog ? { logAnswers: env.changelog.answers } : {}),
      logger, nowMs: () => clock.nowMs(), ledgers: env.ledgers,
    })), onInternal, observe);
  // grpcurl and `buf curl` discover the services and their messages from the node itself.
  // Open even with auth on: it tells the schema, which the package publishes (proto/), and no data.
  addReflection(grpcServer, [TaskService, WorkerService, AdminService]);
  await checkPortFree(config.listen, "listen");
  const grpcPort = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync(config.listen, security.tls?.grpcCredentials ?? grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(listenFailure(config.listen, "listen", err)) : resolve(port))));

  const health = () => ({ node: config.nodeId, grains: host.activeQueues().length, parkedLeases: broker.parked });
  // Dashboard: the JSON API calls the same (stateless) service implementations as gRPC.
  const dashboard = [
    whoamiRoute(security.authn),
    jsonApiRoute([jsonService(AdminService, services.admin), jsonService(TaskService, services.tasks)], { onInternal }),
    staticRoute(findWebRoot()),
  ];
  const httpServer = createHttpServer(metrics, health, dashboard, security.httpGate(config.http), security.tls?.httpsOptions);
  security.tls?.onReload((context) => (httpServer as unknown as TlsServer).setSecureContext(context));
  const [httpHost, httpPortText] = splitHostPort(config.http);
  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", (err) => reject(listenFailure(config.http, "http", err)));
    httpServer.listen(Number(httpPortText), httpHost, () => resolve());
  });
  const httpAddr = httpServer.address();
  const httpPort = typeof httpAddr === "object" && httpAddr ? httpAddr.port : Number(httpPortText);
  metrics.sources.commits = () => db.commits;
  // Only queues this node holds: a cluster member also has rows of partitions it keeps a
  // warm copy of (standbys) or that moved away, and each queue must be counted by one node.
  metrics.sources.depth = () => queries.depth().filter((row) => runtime.router.holds(row.queue));
  metrics.sources.nowMs = () => clock.nowMs();
  metrics.sources.parkedLeases = () => broker.parked;
  metrics.sources.activeGrains = () => host.activeQueues().length;
  metrics.sources.concurrency = () => host.activeQueues().map((queue) => {
    const stats = host.peek(queue)!.stats();
    return { queue, inFlight: stats.inflightKeyed, held: stats.held };
  });
  metrics.sources.sessions = () => sessions.open;
  return {
    grpcServer, sessions, grpcAddress: `${splitHostPort(config.listen)[0]}:${grpcPort}`,
    httpServer, httpAddress: `${httpHost}:${httpPort}`,
  };
}

export function splitHostPort(address: string): [string, string] {
  const i = address.lastIndexOf(":");
  if (i <= 0) throw new Error(`expected HOST:PORT, got ${JSON.stringify(address)}`);
  return [address.slice(0, i), address.slice(i + 1)];
}
