/** AdminService: operator reads (from storage) and actions (through the owning grain). */
import { create } from "@bufbuild/protobuf";
import { LEASE_CALL_IN_FLIGHT_MARGIN_MS } from "../base/lease-timing.js";
import { ConveyorError, invalidField, queueNotFound } from "../base/errors.js";
import { GROUP_SIZE_MAX, KEY_MAX_CHARS, PAGE_SIZE_MAX, QUEUE_NAME_MAX_CHARS, RATE_BURST_MAX, quote } from "../base/limits.js";
import { defaultRateLimit } from "./config.js";
import { ruleFromWire, typeRulesToWire } from "./rules/rule-wire.js";
import { AdminService, BulkAction as WireBulkAction, GroupConfigSchema, GroupState, QueueInfoSchema, type QueueInfo } from "../gen/conveyor/v1/admin_service_pb.js";
import { TaskState as WireState } from "../gen/conveyor/v1/task_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import type { QueueSummary } from "../storage/admin-queries.js";
import { attemptToWire, stateFromWire, taskToWire } from "./convert.js";
import type { Router } from "../cluster/router.js";
import type { LeaseBroker } from "../grains/runtime/lease-broker.js";
import type { TaskRecord } from "../grains/queue/task.js";
import type { WorkerRegistry } from "../grains/runtime/worker-registry.js";
import { ACTIVITY_BUCKET_MS, type ActivityHistory } from "./activity-history.js";
import type { AdminQueries } from "../storage/admin-queries.js";
import type { NodeConfig } from "./config.js";
import type { RuleRegistry } from "./rules/rule-registry.js";
import type { RuleWriter } from "./rules/rule-writer.js";
import type { TaskAccess } from "./task-access.js";
import type { TaskAction } from "../grains/queue/queue-grain.js";
import type { ScheduleMethods } from "./schedule-rpcs.js";
import type { PlacementMethods } from "./placement-rpcs.js";
import { BULK_ACTION_STATES, type BulkAction } from "../grains/queue/bulk-actions.js";
import { checkDurationMs, checkLength, checkRate, checkPageToken, checkQueueName, checkTaskId } from "./validate.js";
import { similarQueue } from "./queue-name-hint.js";

const PAGE_SIZE_DEFAULT = 50;

/** What AdminService uses, and nothing else. */
export interface AdminServiceDeps extends TaskAccess {
  router: Pick<Router, "grainFor" | "holds" | "ownerOf" | "ownership" | "selfId">;
  /** Operator reads: durable facts from storage (they never activate a grain). */
  queries: Pick<AdminQueries, "listQueues" | "listTasks" | "queueSummary" | "queueSettings" | "listGroupConfigs">;
  /** Task types' rules: read here, written through `ruleWriter` (this node's, or the cluster's). */
  rules: Pick<RuleRegistry, "list" | "prepare" | "get">;
  ruleWriter: RuleWriter;
  broker: Pick<LeaseBroker, "parked">;
  /** The workers calling this node, and who holds which lease. */
  workers: Pick<WorkerRegistry, "list" | "holderOf" | "canTakeBatches">;
  /** Per-minute counts of the last hour (GetActivity). */
  activity: Pick<ActivityHistory, "series">;
  /** This node's grains in memory (a live view for GetClusterInfo, never a route). */
  activeQueues: () => string[];
  config: Pick<NodeConfig, "groupMaxSize" | "groupMaxDelayMs" | "groupGracePeriodMs"
    | "rateLimitRatePerSec" | "rateLimitBurst">;
  startedAtMs: number;
  /** GetClusterStatus (server/cluster-status.ts). */
  clusterStatus: UnaryImpl<typeof AdminService>["getClusterStatus"];
  /** Resolves once every write so far is durable (the rule registry's writes). */
  committed: () => Promise<void>;
  /** Whether a queue exists: it has a settings row or any task (a read). */
  queueExists: (queue: string) => boolean;
}

const BULK_ACTIONS: Readonly<Record<Exclude<WireBulkAction, WireBulkAction.UNSPECIFIED>, BulkAction>> = {
  [WireBulkAction.RETRY]: "retry", [WireBulkAction.ARCHIVE]: "archive",
  [WireBulkAction.DELETE]: "delete", [WireBulkAction.CANCEL]: "cancel",
};

/** Every AdminService method but the schedules' (schedule-rpcs.ts) and drain/move (placement-rpcs.ts); node.ts joins them. */
export function adminService(ctx: AdminServiceDeps): Omit<UnaryImpl<typeof AdminService>, ScheduleMethods | PlacementMethods> {
  /** A task as the wire shows it, with the worker holding it and since when while it is active. */
  const withHolder = (record: TaskRecord) => {
    const task = taskToWire(record);
    const holder = record.state === "active" && record.leaseId ? ctx.workers.holderOf(record.leaseId) : undefined;
    if (holder) {
      task.leaseWorkerId = holder.workerId;
      task.leasedAtMs = BigInt(holder.sinceMs);
    }
    return task;
  };

  const toQueueInfo = (q: QueueSummary): QueueInfo => create(QueueInfoSchema, {
    name: q.name, paused: q.paused, owner: ctx.router.ownerOf(q.name), concurrencyLimit: q.keyLimit ?? 0,
    counts: Object.fromEntries(Object.entries(q.counts).map(([k, v]) => [k, BigInt(v)])),
  });

  function queueInfo(name: string): QueueInfo {
    return toQueueInfo(ctx.queries.queueSummary(name));
  }

  /** A limit with the live counts of its grain, when the grain is in memory. */
  async function concurrencyLimit(queue: string, max: number) {
    const stats = await ctx.router.grainFor(queue).stats();
    return { queue, max, inFlight: stats?.inflightKeyed ?? 0, held: stats?.held ?? 0 };
  }

  const serverGroupDefaults = () => ({
    maxSize: ctx.config.groupMaxSize, maxDelayMs: ctx.config.groupMaxDelayMs, graceMs: ctx.config.groupGracePeriodMs,
  });

  function groupConfigToWire(queue: string, group: string, c: { maxSize: number; maxDelayMs: number; graceMs: number }) {
    return create(GroupConfigSchema, { queue, group, maxSize: c.maxSize, maxDelayMs: BigInt(c.maxDelayMs), graceMs: BigInt(c.graceMs) });
  }

  /** For a setting made on a queue that does not exist yet: an existing queue whose name is near (a likely typo). */
  const nearName = (queue: string) => similarQueue(queue, {
    exists: ctx.queueExists,
    known: () => [...ctx.queries.listQueues().map((q) => q.name), ...ctx.workers.list().flatMap((w) => w.queues)],
  });

  async function setPaused(queue: string, paused: boolean) {
    checkQueueName(queue, "queue");
    const similar = nearName(queue);
    await ctx.router.grainFor(queue).setPaused(paused);
    return { queue: queueInfo(queue), similarQueue: similar };
  }

  async function act(id: string, action: TaskAction) {
    checkTaskId(id, "id");
    const task = await ctx.actOnTask(id, action);
    return task ? { task: taskToWire(task) } : {};
  }

  return {
    async listQueues() {
      return { queues: ctx.queries.listQueues().map(toQueueInfo) };
    },
    pauseQueue: (call) => setPaused(call.request.queue, true),
    resumeQueue: (call) => setPaused(call.request.queue, false),

    async listTasks(call) {
      const req = call.request;
      const queue = checkQueueName(req.queue, "queue");
      const state = req.state === WireState.UNSPECIFIED ? undefined : stateFromWire(req.state);
      if (req.state !== WireState.UNSPECIFIED && !state) throw invalidField("state", `unknown state ${req.state}`);
      if (req.pageSize > PAGE_SIZE_MAX) throw invalidField("page_size", `must be at most ${PAGE_SIZE_MAX}, got ${req.pageSize}`);
      const pageToken = checkPageToken(req.pageToken, "page_token");
      if (!ctx.queueExists(queue)) throw queueNotFound(queue);
      const page = ctx.queries.listTasks(queue, state, req.pageSize || PAGE_SIZE_DEFAULT, pageToken);
      return { tasks: page.tasks.map(withHolder), nextPageToken: page.nextCursor };
    },

    async getTask(call) {
      const task = ctx.getTaskOrThrow(checkTaskId(call.request.id, "id"));
      return { task: withHolder(task), attempts: ctx.attemptsOf(task.id).map(attemptToWire) };
    },

    async getActivity(call) {
      const queue = checkLength(call.request.queue, "queue", QUEUE_NAME_MAX_CHARS);
      return {
        bucketMs: BigInt(ACTIVITY_BUCKET_MS),
        buckets: ctx.activity.series(queue).map((b) => ({
          startMs: BigInt(b.startMs), enqueued: BigInt(b.enqueued), completed: BigInt(b.completed),
          retried: BigInt(b.retried), archived: BigInt(b.archived),
        })),
      };
    },

    async listWorkers() {
      return {
        workers: ctx.workers.list().map((w) => ({
          workerId: w.workerId, host: w.host, queues: w.queues, types: w.types, concurrency: w.concurrency,
          inFlight: w.inFlight, lastSeenAtMs: BigInt(w.lastSeenMs), connectedSinceMs: BigInt(w.connectedSinceMs), polling: w.polling,
        })),
      };
    },
    cancelTask: (call) => act(call.request.id, "cancel"),
    async deleteTask(call) {
      await act(call.request.id, "delete");
      return {};
    },
    runTask: (call) => act(call.request.id, "run"),
    archiveTask: (call) => act(call.request.id, "archive"),
    retryTask: (call) => act(call.request.id, "retry"),

    async setQueueConcurrencyLimit(call) {
      const queue = checkQueueName(call.request.queue, "queue");
      const max = call.request.max;
      if (max < 1) throw invalidField("max", `must be at least 1, got ${max}`);
      const similar = nearName(queue);
      await ctx.router.grainFor(queue).setKeyLimit(max);
      return { limit: await concurrencyLimit(queue, max), similarQueue: similar };
    },

    async deleteQueueConcurrencyLimit(call) {
      const queue = checkQueueName(call.request.queue, "queue");
      if (ctx.queries.queueSettings().find((q) => q.name === queue)?.keyLimit === undefined) {
        throw new ConveyorError("NOT_FOUND", "LIMIT_NOT_FOUND", `queue ${quote(queue)} has no concurrency limit`);
      }
      await ctx.router.grainFor(queue).setKeyLimit(undefined);
      return {};
    },

    async listConcurrencyLimits() {
      // Live counts come from grains, so only queues this node serves are read here; the
      // forwarding layer asks every member for its own (a standby's copy of another
      // member's partition has the setting's row too, but no grain here may serve it).
      const limits = ctx.queries.queueSettings().filter((q) => q.keyLimit !== undefined && ctx.router.holds(q.name));
      return { limits: await Promise.all(limits.map((q) => concurrencyLimit(q.name, q.keyLimit!))) };
    },

    async setQueueRateLimit(call) {
      const queue = checkQueueName(call.request.queue, "queue");
      const { ratePerSec } = call.request;
      checkRate(ratePerSec, "rate_per_sec");
      if (call.request.burst > RATE_BURST_MAX) throw invalidField("burst", `must be at most ${RATE_BURST_MAX}, got ${call.request.burst}`);
      const burst = call.request.burst || Math.max(1, Math.ceil(ratePerSec));
      const spec = { ratePerSec, burst };
      const similar = nearName(queue);
      await ctx.router.grainFor(queue).setRateLimit(spec);
      return { limit: { queue, ...spec }, similarQueue: similar };
    },

    async deleteQueueRateLimit(call) {
      const queue = checkQueueName(call.request.queue, "queue");
      if (ctx.queries.queueSettings().find((q) => q.name === queue)?.rateLimit === undefined) {
        throw new ConveyorError("NOT_FOUND", "LIMIT_NOT_FOUND", `queue ${quote(queue)} has no rate limit override`);
      }
      await ctx.router.grainFor(queue).setRateLimit(undefined);
      return {};
    },

    async setGroupConfig(call) {
      const c = call.request.config;
      if (!c) throw invalidField("config", "missing");
      const queue = checkQueueName(c.queue, "config.queue");
      checkLength(c.group, "config.group", KEY_MAX_CHARS);
      if (c.maxSize < 1) throw invalidField("config.max_size", `must be at least 1, got ${c.maxSize}`);
      if (c.maxSize > GROUP_SIZE_MAX) throw invalidField("config.max_size", `must be at most ${GROUP_SIZE_MAX}, got ${c.maxSize}`);
      if (c.maxDelayMs <= 0n) throw invalidField("config.max_delay_ms", `must be above zero, got ${c.maxDelayMs}`);
      if (c.graceMs <= 0n) throw invalidField("config.grace_ms", `must be above zero, got ${c.graceMs}`);
      const config = {
        maxSize: c.maxSize, maxDelayMs: checkDurationMs(c.maxDelayMs, "config.max_delay_ms"), graceMs: checkDurationMs(c.graceMs, "config.grace_ms"),
      };
      const similar = nearName(queue);
      await ctx.router.grainFor(queue).setGroupConfig(c.group, config);
      return { config: groupConfigToWire(queue, c.group, config), similarQueue: similar };
    },

    async listGroupConfigs(call) {
      const filter = checkLength(call.request.queue, "queue", QUEUE_NAME_MAX_CHARS);
      return {
        configs: ctx.queries.listGroupConfigs().filter((g) => !filter || g.queue === filter).map((g) => groupConfigToWire(g.queue, g.group, g)),
        serverDefault: groupConfigToWire("", "", serverGroupDefaults()),
      };
    },

    async deleteGroupConfig(call) {
      const queue = checkQueueName(call.request.queue, "queue");
      const group = checkLength(call.request.group, "group", KEY_MAX_CHARS);
      if (!(await ctx.router.grainFor(queue).setGroupConfig(group, undefined))) {
        const what = group === "" ? "queue-wide group default" : `override for group ${quote(group)}`;
        throw new ConveyorError("NOT_FOUND", "GROUP_CONFIG_NOT_FOUND", `queue ${quote(queue)} has no ${what}`);
      }
      return {};
    },

    async listGroups(call) {
      const filter = checkLength(call.request.queue, "queue", QUEUE_NAME_MAX_CHARS);
      // Groups live in grain memory: this reads the grains of queues that can have any
      // (aggregating members, or fired batches among their pending tasks), activating them.
      // Only those this node serves: every member answers for its own (rpc-routes.ts).
      const queues = ctx.queries.listQueues()
        .filter((q) => (!filter || q.name === filter) && (q.counts.aggregating > 0 || q.counts.pending > 0) && ctx.router.holds(q.name));
      const refs = queues.map((q) => ctx.router.grainFor(q.name));
      const perQueue = await Promise.all(refs.map((ref) => ref.listGroups()));
      const groups = [];
      for (const [i, q] of queues.entries()) {
        for (const g of perQueue[i]!) {
          groups.push({
            queue: q.name, group: g.group, type: g.type,
            state: g.state === "aggregating" ? GroupState.AGGREGATING : GroupState.READY,
            size: g.size, firstMemberAtMs: BigInt(g.firstAtMs), lastMemberAtMs: BigInt(g.lastAtMs),
            nextFireAtMs: BigInt(g.nextFireAtMs), workerAvailable: ctx.workers.canTakeBatches(q.name, g.type),
            config: groupConfigToWire(q.name, g.group, g.config),
          });
        }
      }
      return { groups };
    },

    async listStrategies() {
      return { types: ctx.rules.list().map(typeRulesToWire) };
    },

    async setStrategies(call) {
      const type = checkLength(call.request.type, "type", KEY_MAX_CHARS);
      if (type === "") throw invalidField("type", "must not be empty");
      if (call.request.rules.length === 0) throw invalidField("rules", "give at least one rule (use DeleteStrategies to clear)");
      const rules = call.request.rules.map(ruleFromWire);
      await ctx.rules.prepare(rules);
      const saved = await ctx.ruleWriter.set(type, rules, "operator");
      await ctx.committed();
      return { rules: typeRulesToWire(saved) };
    },

    async deleteStrategies(call) {
      const type = checkLength(call.request.type, "type", KEY_MAX_CHARS);
      if (!ctx.rules.get(type)) throw new ConveyorError("NOT_FOUND", "RULES_NOT_FOUND", `task type ${quote(type)} has no concurrency rules`);
      await ctx.ruleWriter.delete(type);
      await ctx.committed();
      return {};
    },

    async getClusterInfo() {
      const { ownership } = ctx.router;
      const queues = ctx.activeQueues().sort();
      return {
        nodeId: ctx.router.selfId, ringVersion: BigInt(ownership.ringVersion),
        members: ownership.members().map((id) => ({ nodeId: id, self: id === ctx.router.selfId })),
        activeGrains: queues.length, activeQueues: queues, parkedLeases: ctx.broker.parked,
        startedAtMs: BigInt(ctx.startedAtMs),
      };
    },

    getClusterStatus: (call) => ctx.clusterStatus(call),

    async deleteQueue(call) {
      const queue = checkQueueName(call.request.queue, "queue");
      const deleted = await ctx.router.grainFor(queue).remove();
      return { deletedTasks: BigInt(deleted) };
    },

    async bulkTaskAction(call) {
      const req = call.request;
      const queue = checkQueueName(req.queue, "queue");
      const action = BULK_ACTIONS[req.action as keyof typeof BULK_ACTIONS] as BulkAction | undefined;
      if (!action) throw invalidField("action", `must be one of RETRY, ARCHIVE, DELETE, CANCEL, got ${req.action}`);
      const state = stateFromWire(req.state);
      if (!state) throw invalidField("state", req.state === WireState.UNSPECIFIED ? "is required" : `unknown state ${req.state}`);
      const allowed = BULK_ACTION_STATES[action];
      if (!allowed.includes(state)) {
        throw invalidField("state", `${action} applies to tasks that are ${allowed.join(", ")}; not ${state}`);
      }
      if (!ctx.queueExists(queue)) throw queueNotFound(queue);
      return { affected: BigInt(await ctx.router.grainFor(queue).bulkAct(action, state)) };
    },

    async listRateLimits() {
      const fallback = defaultRateLimit(ctx.config);
      return {
        limits: ctx.queries.queueSettings().filter((q) => q.rateLimit !== undefined).map((q) => ({ queue: q.name, ...q.rateLimit! })),
        ...(fallback ? { defaultLimit: { queue: "", ...fallback } } : {}),
      };
    },
  };
}
