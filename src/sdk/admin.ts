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
import { toTaskDetail, type TaskDetail } from "./attempts.js";
import { toClusterStatus, toDrainResult, toMoveResult, type ClusterStatus, type DrainResult, type MoveResult } from "./cluster-views.js";
import { bulkActionToWire, toActivity, toWorkerView, type Activity, type BulkActionName, type WorkerView } from "./operations-views.js";

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

  /**
   * Removes a queue that holds no unfinished task, with its finished tasks and settings;
   * resolves with how many finished tasks went with it. NOT_FOUND (QUEUE_NOT_FOUND) for an
   * unknown queue, FAILED_PRECONDITION (QUEUE_HAS_UNFINISHED_TASKS) while tasks remain.
   */
  async deleteQueue(queue: string): Promise<{ deletedTasks: number }> {
    const res = await this.rpc.deleteQueue({ queue }, this.callOptions);
    return { deletedTasks: Number(res.deletedTasks) };
  }

  // ---- tasks -------------------------------------------------------------------------

  /** One page of a queue's tasks, optionally of one state. */
  async listTasks(queue: string, options: { state?: Exclude<TaskState, "unknown">; pageSize?: number; pageToken?: string } = {}): Promise<TaskPage> {
    const res = await this.rpc.listTasks({
      queue, state: options.state === undefined ? 0 : checkedState(options.state), pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "",
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

  /** The task and its attempt history (oldest first, the last 25). */
  async getTask(id: string): Promise<TaskDetail> {
    return toTaskDetail(await this.rpc.getTask({ id }, this.callOptions));
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

  /**
   * One action on every task of `queue` in `state`, run by the node in batches (the
   * queue keeps serving between them); resolves once all are done with how many tasks
   * changed (a task that moved on meanwhile is not counted). The pairs mirror the
   * single-task actions: retry archived or cancelled; archive scheduled, pending, retry or
   * aggregating; cancel any unfinished state; delete any state but active. Another pair
   * is INVALID_ARGUMENT. The shorthands `retryAll` … `cancelAll` call this.
   */
  async bulkTaskAction(queue: string, action: BulkActionName, state: Exclude<TaskState, "unknown">): Promise<{ affected: number }> {
    const wireAction = bulkActionToWire(action);
    const res = await this.rpc.bulkTaskAction({ queue, state: checkedState(state), action: wireAction }, this.callOptions);
    return { affected: Number(res.affected) };
  }

  /** Gives every archived (or cancelled) task of a queue a fresh set of retries. */
  retryAll(queue: string, state: "archived" | "cancelled" = "archived"): Promise<{ affected: number }> {
    return this.bulkTaskAction(queue, "retry", state);
  }

  /** Archives every task of a queue in a waiting state. */
  archiveAll(queue: string, state: "scheduled" | "pending" | "retry" | "aggregating"): Promise<{ affected: number }> {
    return this.bulkTaskAction(queue, "archive", state);
  }

  /** Deletes every task of a queue in a state (not active). */
  deleteAll(queue: string, state: Exclude<TaskState, "unknown" | "active">): Promise<{ affected: number }> {
    return this.bulkTaskAction(queue, "delete", state);
  }

  /** Cancels every task of a queue in an unfinished state. */
  cancelAll(queue: string, state: "scheduled" | "pending" | "aggregating" | "active" | "retry"): Promise<{ affected: number }> {
    return this.bulkTaskAction(queue, "cancel", state);
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

  /** The workers that called the answering node recently: what each leases from and runs, what it holds now. */
  async listWorkers(): Promise<WorkerView[]> {
    return (await this.rpc.listWorkers({}, this.callOptions)).workers.map(toWorkerView);
  }

  /** Per-minute counts of the last hour on the answering node (memory only), for one queue or all. */
  async activity(queue?: string): Promise<Activity> {
    return toActivity(await this.rpc.getActivity({ queue: queue ?? "" }, this.callOptions));
  }

  /**
   * The cluster's membership and every partition's owner as the answering node sees it (a
   * ring of one on a single node). `withLeases` asks etcd for each member's lease time
   * left; `withLog` reads each partition's last changelog sequence.
   */
  async clusterStatus(options: { withLeases?: boolean; withLog?: boolean } = {}): Promise<ClusterStatus> {
    const res = await this.rpc.getClusterStatus({ withLeases: options.withLeases ?? false, withLog: options.withLog ?? false }, this.callOptions);
    return toClusterStatus(res);
  }

  /**
   * Drains a cluster member (kept in etcd until undone, across restarts): it keeps serving
   * forwarded calls but its partitions move to the others. `undo` undrains it. With `wait`
   * (at most 10 min) the node answers once the member holds nothing or the wait is over;
   * `finished` says which. FAILED_PRECONDITION (NOT_A_CLUSTER) on a single node.
   */
  async drainNode(nodeId: string, options: { undo?: boolean; wait?: Duration } = {}): Promise<DrainResult> {
    const waitMs = waitMsOf(options.wait);
    const res = await this.rpc.drainNode({ nodeId, undo: options.undo ?? false, waitMs }, this.waitingCall(waitMs));
    return toDrainResult(res);
  }

  /**
   * Moves a partition to a member by pinning it there (kept in etcd), or with
   * `{ unpin: true }` lets the ring place it again. With `wait` (at most 10 min) the node
   * answers once the member holds it or the wait is over. FAILED_PRECONDITION
   * (NOT_A_CLUSTER) on a single node; INVALID_ARGUMENT for a partition out of range.
   */
  async movePartition(partition: number, target: { to: string } | { unpin: true }, options: { wait?: Duration } = {}): Promise<MoveResult> {
    const waitMs = waitMsOf(options.wait);
    const unpin = "unpin" in target && target.unpin === true;
    const toNodeId = "to" in target ? target.to : "";
    const res = await this.rpc.movePartition({ partition, toNodeId, unpin, waitMs }, this.waitingCall(waitMs));
    return toMoveResult(res);
  }

  /** A call the node may hold for `waitMs` before answering: its deadline grows by that much. */
  private waitingCall(waitMs: number): CallOptions {
    return { ...this.callOptions, timeoutMs: (this.callOptions.timeoutMs ?? 30_000) + waitMs };
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

/** A state name checked before the call (a plain-JS caller's typo names the choices). */
function checkedState(state: Exclude<TaskState, "unknown">) {
  if (!TASK_STATE_NAMES.includes(state)) {
    throw new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `unknown task state ${JSON.stringify(state)}; use one of ${TASK_STATE_NAMES.join(", ")}`, "state");
  }
  return stateToWire(state);
}

/** A wait as whole ms for the wire (uint32; the node refuses more than 10 min, naming wait_ms). */
function waitMsOf(wait: Duration | undefined): number {
  if (wait === undefined) return 0;
  let ms: number;
  try {
    ms = typeof wait === "number" ? Math.round(wait) : parseDurationMs(wait);
  } catch (e) {
    throw new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", (e as Error).message, "wait");
  }
  if (!(ms >= 0) || ms > 0xffff_ffff) throw new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `wait must be between 0 and 10m (got ${String(wait)})`, "wait");
  return ms;
}

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
