/**
 * The admin/inspector API: AdminService with typed answers (numbers, Dates, state names;
 * no int64 strings, no wire enums). Every call is one RPC; nothing is cached.
 * Get one from `client.admin` (same connection) or `new Admin(options)`.
 */
import { ConveyorError } from "../base/errors.js";
import { parseDurationMs } from "../base/duration.js";
import {
  AdminService, GroupState, type ConcurrencyLimit as WireConcurrencyLimit, type GroupConfig as WireGroupConfig,
  type QueueInfo as WireQueueInfo, type RateLimit as WireRateLimit,
} from "../gen/conveyor/v1/admin_service_pb.js";
import type { ConcurrencyRule, Task } from "../gen/conveyor/v1/task_pb.js";
import type { RpcChannel } from "../rpc/client.js";
import type { CallOptions, UnaryClient } from "../rpc/service-definition.js";
import { TASK_STATE_NAMES, stateToWire, strategyFromWire } from "../rpc/wire-names.js";
import { connectTo, type ConnectionOptions } from "./connection.js";
import { ruleToWire, type ConcurrencyRuleSpec } from "./mux.js";
import { Schedules } from "./schedules.js";
import { toTaskView, type Duration, type TaskState, type TaskView } from "./task.js";

export interface AdminOptions extends ConnectionOptions {
  /** Deadline of each RPC once connected; default 30 s. */
  timeoutMs?: number;
}

/** Tasks of a queue per state. */
export type StateCounts = Record<Exclude<TaskState, "unknown">, number>;

export interface QueueInfo {
  name: string;
  paused: boolean;
  counts: StateCounts;
  /** The node that owns the queue. */
  owner: string;
  /** The per-key concurrency limit; undefined when the queue has none. */
  concurrencyLimit: number | undefined;
}

/**
 * What a setting made on a queue adds: `similarQueue` is set when the queue had no task, no
 * setting and no polling worker before the call and an existing queue's name is near it
 * (a likely typo; the setting was made all the same).
 */
export interface QueueNameHint {
  similarQueue?: string;
}

/** `similarQueue` only when the node named one. */
const hint = (similarQueue: string): QueueNameHint => (similarQueue ? { similarQueue } : {});

export interface TaskPage {
  tasks: TaskView[];
  /** Pass to the next `listTasks` call; undefined on the last page. */
  nextPageToken: string | undefined;
}

export interface ConcurrencyLimitInfo {
  queue: string;
  max: number;
  inFlight: number;
  held: number;
}

export interface RateLimitInfo {
  queue: string;
  ratePerSec: number;
  burst: number;
}

export interface GroupConfigInfo {
  queue: string;
  /** "" for the queue-wide default. */
  group: string;
  maxSize: number;
  maxDelayMs: number;
  graceMs: number;
}

export interface GroupInfo {
  queue: string;
  group: string;
  type: string;
  state: "aggregating" | "ready" | "unknown";
  size: number;
  firstMemberAt: Date | undefined;
  lastMemberAt: Date | undefined;
  nextFireAt: Date | undefined;
  /** Whether a worker with a batch handler for the type has leased from the queue lately. */
  workerAvailable: boolean;
  config: GroupConfigInfo | undefined;
}

export interface TaskTypeRulesInfo {
  type: string;
  rules: ConcurrencyRuleSpec[];
  /** Who set them (a worker's registration or an operator). */
  source: string;
  updatedAt: Date | undefined;
}

export interface ClusterInfo {
  nodeId: string;
  ringVersion: number;
  members: Array<{ nodeId: string; self: boolean }>;
  activeGrains: number;
  activeQueues: string[];
  parkedLeases: number;
  startedAt: Date | undefined;
}

export class Admin {
  private readonly rpc: UnaryClient<typeof AdminService>;
  private readonly channel: RpcChannel;
  private readonly ownsChannel: boolean;
  private readonly callOptions: CallOptions;
  private schedulesApi: Schedules | undefined;

  constructor(options?: AdminOptions);
  /** @internal `client.admin`: shares the client's channel and call options. */
  constructor(options: AdminOptions, shared: { channel: RpcChannel; callOptions: CallOptions });
  constructor(options: AdminOptions = {}, shared?: { channel: RpcChannel; callOptions: CallOptions }) {
    if (shared) {
      this.channel = shared.channel;
      this.callOptions = shared.callOptions;
      this.ownsChannel = false;
    } else {
      const connection = connectTo(options, "Admin");
      this.channel = connection.channel;
      this.callOptions = { timeoutMs: options.timeoutMs ?? 30_000, waitForReady: true, connectTimeoutMs: connection.connectTimeoutMs };
      this.ownsChannel = true;
    }
    this.rpc = this.channel.service(AdminService);
  }

  /** Schedules (periodic tasks), on this admin's connection. */
  get schedules(): Schedules {
    this.schedulesApi ??= new Schedules({ channel: this.channel, timeoutMs: this.callOptions.timeoutMs ?? 30_000 });
    return this.schedulesApi;
  }

  // ---- queues ------------------------------------------------------------------------

  async listQueues(): Promise<QueueInfo[]> {
    const res = await this.rpc.listQueues({}, this.callOptions);
    return res.queues.map(toQueueInfo);
  }

  /** One queue's info; undefined when the node knows no such queue. */
  async getQueue(queue: string): Promise<QueueInfo | undefined> {
    return (await this.listQueues()).find((q) => q.name === queue);
  }

  /** Pauses any valid queue name, one without tasks yet included: the pause holds for tasks enqueued later. */
  async pauseQueue(queue: string): Promise<QueueInfo & QueueNameHint> {
    const res = await this.rpc.pauseQueue({ queue }, this.callOptions);
    return { ...toQueueInfo(res.queue!), ...hint(res.similarQueue) };
  }

  async resumeQueue(queue: string): Promise<QueueInfo & QueueNameHint> {
    const res = await this.rpc.resumeQueue({ queue }, this.callOptions);
    return { ...toQueueInfo(res.queue!), ...hint(res.similarQueue) };
  }

  // ---- tasks -------------------------------------------------------------------------

  /** One page of a queue's tasks, optionally of one state. */
  async listTasks(queue: string, options: { state?: Exclude<TaskState, "unknown">; pageSize?: number; pageToken?: string } = {}): Promise<TaskPage> {
    if (options.state !== undefined && !TASK_STATE_NAMES.includes(options.state)) {
      throw new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `unknown task state ${JSON.stringify(options.state)}; use one of ${TASK_STATE_NAMES.join(", ")}`, "state");
    }
    const res = await this.rpc.listTasks({
      queue, state: options.state === undefined ? 0 : stateToWire(options.state), pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "",
    }, this.callOptions);
    return { tasks: res.tasks.map(toTaskView), nextPageToken: res.nextPageToken || undefined };
  }

  /** Every task of a queue (optionally of one state), page by page. */
  async *tasks(queue: string, options: { state?: Exclude<TaskState, "unknown">; pageSize?: number } = {}): AsyncGenerator<TaskView> {
    let pageToken: string | undefined;
    do {
      const page = await this.listTasks(queue, { ...options, ...(pageToken ? { pageToken } : {}) });
      yield* page.tasks;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  async getTask(id: string): Promise<TaskView> {
    return taskOf(await this.rpc.getTask({ id }, this.callOptions));
  }

  /** Cancels a task that has not finished (a running one's worker is told). */
  async cancelTask(id: string): Promise<TaskView> {
    return taskOf(await this.rpc.cancelTask({ id }, this.callOptions));
  }

  /** Runs a scheduled or retrying task now. */
  async runTask(id: string): Promise<TaskView> {
    return taskOf(await this.rpc.runTask({ id }, this.callOptions));
  }

  /** Archives (dead-letters) a task that has not finished. */
  async archiveTask(id: string): Promise<TaskView> {
    return taskOf(await this.rpc.archiveTask({ id }, this.callOptions));
  }

  /** Runs an archived or cancelled task again, with a fresh set of retries. */
  async retryTask(id: string): Promise<TaskView> {
    return taskOf(await this.rpc.retryTask({ id }, this.callOptions));
  }

  /** Deletes a task that is not running. */
  async deleteTask(id: string): Promise<void> {
    await this.rpc.deleteTask({ id }, this.callOptions);
  }

  // ---- limits ------------------------------------------------------------------------

  async setConcurrencyLimit(queue: string, max: number): Promise<ConcurrencyLimitInfo & QueueNameHint> {
    const res = await this.rpc.setQueueConcurrencyLimit({ queue, max }, this.callOptions);
    return { ...toConcurrencyLimit(res.limit!), ...hint(res.similarQueue) };
  }

  async deleteConcurrencyLimit(queue: string): Promise<void> {
    await this.rpc.deleteQueueConcurrencyLimit({ queue }, this.callOptions);
  }

  async listConcurrencyLimits(): Promise<ConcurrencyLimitInfo[]> {
    const res = await this.rpc.listConcurrencyLimits({}, this.callOptions);
    return res.limits.map(toConcurrencyLimit);
  }

  async setRateLimit(queue: string, limit: { ratePerSec: number; burst?: number }): Promise<RateLimitInfo & QueueNameHint> {
    const res = await this.rpc.setQueueRateLimit({ queue, ratePerSec: limit.ratePerSec, burst: limit.burst ?? 0 }, this.callOptions);
    return { ...toRateLimit(res.limit!), ...hint(res.similarQueue) };
  }

  async deleteRateLimit(queue: string): Promise<void> {
    await this.rpc.deleteQueueRateLimit({ queue }, this.callOptions);
  }

  /** The queues' rate limits, and the node's default (undefined when there is none). */
  async listRateLimits(): Promise<{ limits: RateLimitInfo[]; defaultLimit: RateLimitInfo | undefined }> {
    const res = await this.rpc.listRateLimits({}, this.callOptions);
    return { limits: res.limits.map(toRateLimit), defaultLimit: res.defaultLimit && toRateLimit(res.defaultLimit) };
  }

  // ---- groups ------------------------------------------------------------------------

  /** Sets a group's thresholds (group "" = the queue-wide default); unset ones keep the defaults. */
  async setGroupConfig(queue: string, group: string, config: { maxSize?: number; maxDelay?: Duration; grace?: Duration }): Promise<GroupConfigInfo & QueueNameHint> {
    const res = await this.rpc.setGroupConfig({
      config: { queue, group, maxSize: config.maxSize ?? 0, maxDelayMs: durationMs(config.maxDelay), graceMs: durationMs(config.grace) },
    }, this.callOptions);
    return { ...toGroupConfig(res.config!), ...hint(res.similarQueue) };
  }

  async deleteGroupConfig(queue: string, group: string): Promise<void> {
    await this.rpc.deleteGroupConfig({ queue, group }, this.callOptions);
  }

  async listGroupConfigs(queue: string): Promise<{ configs: GroupConfigInfo[]; serverDefault: GroupConfigInfo | undefined }> {
    const res = await this.rpc.listGroupConfigs({ queue }, this.callOptions);
    return { configs: res.configs.map(toGroupConfig), serverDefault: res.serverDefault && toGroupConfig(res.serverDefault) };
  }

  async listGroups(queue: string): Promise<GroupInfo[]> {
    const res = await this.rpc.listGroups({ queue }, this.callOptions);
    return res.groups.map((g) => ({
      queue: g.queue, group: g.group, type: g.type,
      state: g.state === GroupState.AGGREGATING ? "aggregating" : g.state === GroupState.READY ? "ready" : "unknown",
      size: g.size, firstMemberAt: date(g.firstMemberAtMs), lastMemberAt: date(g.lastMemberAtMs), nextFireAt: date(g.nextFireAtMs),
      workerAvailable: g.workerAvailable, config: g.config && toGroupConfig(g.config),
    }));
  }

  // ---- concurrency rules (strategies) ------------------------------------------------

  async listStrategies(): Promise<TaskTypeRulesInfo[]> {
    const res = await this.rpc.listStrategies({}, this.callOptions);
    return res.types.map((t) => ({ type: t.type, rules: t.rules.map(toRuleSpec), source: t.source, updatedAt: date(t.updatedAtMs) }));
  }

  /** Replaces a task type's concurrency rules. */
  async setStrategies(type: string, rules: readonly ConcurrencyRuleSpec[]): Promise<TaskTypeRulesInfo> {
    const res = await this.rpc.setStrategies({ type, rules: rules.map(ruleToWire) }, this.callOptions);
    const t = res.rules!;
    return { type: t.type, rules: t.rules.map(toRuleSpec), source: t.source, updatedAt: date(t.updatedAtMs) };
  }

  async deleteStrategies(type: string): Promise<void> {
    await this.rpc.deleteStrategies({ type }, this.callOptions);
  }

  // ---- node --------------------------------------------------------------------------

  async clusterInfo(): Promise<ClusterInfo> {
    const r = await this.rpc.getClusterInfo({}, this.callOptions);
    return {
      nodeId: r.nodeId, ringVersion: Number(r.ringVersion), members: r.members.map((m) => ({ nodeId: m.nodeId, self: m.self })),
      activeGrains: r.activeGrains, activeQueues: [...r.activeQueues], parkedLeases: r.parkedLeases, startedAt: date(r.startedAtMs),
    };
  }

  /** Closes the connection (a no-op for `client.admin`: the client owns it). */
  close(): void {
    if (this.ownsChannel) this.channel.close();
  }
}

const date = (v: bigint): Date | undefined => (v === 0n ? undefined : new Date(Number(v)));
const durationMs = (d: Duration | undefined): bigint =>
  d === undefined ? 0n : BigInt(typeof d === "number" ? Math.round(d) : parseDurationMs(d));
const taskOf = (res: { task?: Task | undefined }): TaskView => toTaskView(res.task!);

function toQueueInfo(q: WireQueueInfo): QueueInfo {
  const c = q.counts;
  const counts = Object.fromEntries(TASK_STATE_NAMES.map((s) => [s, Number(c?.[s] ?? 0n)])) as StateCounts;
  return { name: q.name, paused: q.paused, counts, owner: q.owner, concurrencyLimit: q.concurrencyLimit || undefined };
}

const toConcurrencyLimit = (l: WireConcurrencyLimit): ConcurrencyLimitInfo => ({ queue: l.queue, max: l.max, inFlight: l.inFlight, held: l.held });
const toRateLimit = (l: WireRateLimit): RateLimitInfo => ({ queue: l.queue, ratePerSec: l.ratePerSec, burst: l.burst });
const toGroupConfig = (g: WireGroupConfig): GroupConfigInfo => ({
  queue: g.queue, group: g.group, maxSize: g.maxSize, maxDelayMs: Number(g.maxDelayMs), graceMs: Number(g.graceMs),
});

function toRuleSpec(r: ConcurrencyRule): ConcurrencyRuleSpec {
  const strategy = strategyFromWire(r.strategy);
  if (!strategy) throw new ConveyorError("INTERNAL", "INTERNAL", `the node sent an unknown limit strategy ${r.strategy} (a newer server?)`);
  return {
    ...(r.name ? { name: r.name } : {}), expression: r.expression,
    maxRuns: r.maxRunsExpression !== "" ? r.maxRunsExpression : r.maxRuns, limitStrategy: strategy,
  };
}
