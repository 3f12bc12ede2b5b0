/**
 * Roles and THE table of what each RPC needs: the roles that may call it, and the queues
 * its request touches (queue-access.ts), which a scoped identity must have in its scope.
 * Every RPC of every conveyor service is listed here once (test/unit/rpc-roles.test.ts
 * walks the generated descriptors and fails on a missing or unknown entry, and on a row
 * whose request names a queue the `queues` column does not read), so a new RPC cannot
 * ship without both decisions. `admin` may call everything but the node-to-node
 * ClusterService; `roles` names the others. `node` is the role of another node of the
 * cluster (identity.ts): it may call ClusterService and forward calls for a caller,
 * nothing else, and no other role may call ClusterService.
 */
import type { GetClusterInfoResponse, ListConcurrencyLimitsResponse, ListGroupConfigsRequest, ListGroupConfigsResponse, ListGroupsRequest,
  ListGroupsResponse, ListQueuesResponse, ListRateLimitsResponse, ListSchedulesRequest, ListSchedulesResponse, ListWorkersResponse,
  SetGroupConfigRequest, SetScheduleRequest, GetActivityRequest } from "../../gen/conveyor/v1/admin_service_pb.js";
import type { EnqueueBatchRequest, EnqueueRequest } from "../../gen/conveyor/v1/task_service_pb.js";
import type { HeartbeatRequest, LeaseRequest, SettleRequest } from "../../gen/conveyor/v1/worker_service_pb.js";
import { DEFAULT_QUEUE } from "../validate.js";
import { byTaskId, everyQueue, named, namedOrEvery, nodeWide, specQueue, within, type QueueAccess } from "./queue-access.js";

export const ROLES = ["admin", "producer", "worker", "reader", "node"] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (value: unknown): value is Role => (ROLES as readonly unknown[]).includes(value);

export interface RpcRule {
  /** The roles besides `admin` that may call it (none: admin only, and audited). */
  roles: readonly Role[];
  queues: QueueAccess;
  /** Node-to-node only: `roles` alone, not even admin (a handoff's rows come from a node, never from a client). */
  nodeOnly?: true;
}

const READ: readonly Role[] = ["reader"];
const ADMIN: readonly Role[] = [];

/** `{ queue }` requests: the one queue field, as given (an empty name is no queue in scope). */
const QUEUE_FIELD = named<{ queue: string }>("queue", (r) => [r.queue]);
/** Schedule commands: `queue`, empty meaning the default queue (as schedule-rpcs.ts reads it). */
const SCHEDULE_QUEUE = named<{ queue: string }>("queue (empty: default)", (r) => specQueue(r, DEFAULT_QUEUE));
const BY_TASK_ID = byTaskId();
const TASK_SPECS = named<EnqueueBatchRequest>("tasks[].queue (empty: default)", (r) => r.tasks.flatMap((t) => specQueue(t, DEFAULT_QUEUE)));

/** `Service/Method` (the service's short name) → what it needs. */
export const RPC_TABLE: Readonly<Record<string, RpcRule>> = {
  "TaskService/Enqueue": { roles: ["producer"], queues: named<EnqueueRequest>("task.queue (empty: default)", (r) => specQueue(r.task, DEFAULT_QUEUE)) },
  "TaskService/EnqueueBatch": { roles: ["producer"], queues: TASK_SPECS },
  "TaskService/EnqueueTx": { roles: ["producer"], queues: TASK_SPECS },
  // A producer reads back what it enqueued; a reader reads everything.
  "TaskService/GetTask": { roles: ["producer", "reader"], queues: BY_TASK_ID },
  "TaskService/CancelTask": { roles: ["producer"], queues: BY_TASK_ID },
  // Waiting for a task's end is reading it, later.
  "TaskService/WaitTask": { roles: ["producer", "reader"], queues: BY_TASK_ID },

  "WorkerService/Lease": { roles: ["worker"], queues: named<LeaseRequest>("queues[].queue", (r) => r.queues.map((q) => q.queue)) },
  "WorkerService/Heartbeat": { roles: ["worker"], queues: named<HeartbeatRequest>("leases[].queue", (r) => r.leases.map((l) => l.queue)) },
  "WorkerService/Settle": { roles: ["worker"], queues: named<SettleRequest>("settlements[].queue", (r) => r.settlements.map((s) => s.queue)) },
  // Every worker registers its types at start, scoped or not. Known gap: the rules it
  // registers belong to the task type, which every queue shares.
  "WorkerService/RegisterTaskTypes": { roles: ["worker"], queues: nodeWide("task types and their rules are node-wide, not per queue") },

  "AdminService/ListQueues": { roles: READ, queues: everyQueue<ListQueuesResponse>((res, allows) => ({ ...res, queues: within(res.queues, (q) => q.name, allows) })) },
  "AdminService/ListTasks": { roles: READ, queues: QUEUE_FIELD },
  "AdminService/GetTask": { roles: READ, queues: BY_TASK_ID },
  "AdminService/ListConcurrencyLimits": { roles: READ, queues: everyQueue<ListConcurrencyLimitsResponse>((res, allows) => ({ ...res, limits: within(res.limits, (l) => l.queue, allows) })) },
  "AdminService/ListRateLimits": { roles: READ, queues: everyQueue<ListRateLimitsResponse>((res, allows) => ({ ...res, limits: within(res.limits, (l) => l.queue, allows) })) },
  "AdminService/ListGroupConfigs": { roles: READ, queues: namedOrEvery<ListGroupConfigsRequest, ListGroupConfigsResponse>("queue", (r) => r.queue, (res, allows) => ({ ...res, configs: within(res.configs, (c) => c.queue, allows) })) },
  "AdminService/ListGroups": { roles: READ, queues: namedOrEvery<ListGroupsRequest, ListGroupsResponse>("queue", (r) => r.queue, (res, allows) => ({ ...res, groups: within(res.groups, (g) => g.queue, allows) })) },
  // Task types' rules apply in every queue and hold no queue's data: a scoped reader sees why its tasks wait.
  "AdminService/ListStrategies": { roles: READ, queues: nodeWide("task types' concurrency rules are node-wide, not per queue") },
  "AdminService/GetClusterInfo": {
    roles: READ, queues: everyQueue<GetClusterInfoResponse>((res, allows) => {
      const activeQueues = res.activeQueues.filter(allows);
      return { ...res, activeQueues, activeGrains: activeQueues.length };
    }),
  },
  // A worker is shown when it serves a queue in scope, with only those queues listed.
  "AdminService/ListWorkers": {
    roles: READ, queues: everyQueue<ListWorkersResponse>((res, allows) => ({
      ...res, workers: res.workers.filter((w) => w.queues.some(allows)).map((w) => ({ ...w, queues: w.queues.filter(allows) })),
    })),
  },
  // Every queue's counts are summed in one series: they cannot be cut to a scope.
  "AdminService/GetActivity": { roles: READ, queues: namedOrEvery<GetActivityRequest, never>("queue", (r) => r.queue) },
  "AdminService/ListSchedules": { roles: READ, queues: namedOrEvery<ListSchedulesRequest, ListSchedulesResponse>("queue", (r) => r.queue, (res, allows) => ({ ...res, schedules: within(res.schedules, (s) => s.task?.queue ?? "", allows) })) },
  "AdminService/GetClusterStatus": { roles: READ, queues: nodeWide("cluster membership and partitions hold no queue's data") },
  "AdminService/PauseQueue": { roles: ADMIN, queues: QUEUE_FIELD },
  "AdminService/ResumeQueue": { roles: ADMIN, queues: QUEUE_FIELD },
  "AdminService/CancelTask": { roles: ADMIN, queues: BY_TASK_ID },
  "AdminService/DeleteTask": { roles: ADMIN, queues: BY_TASK_ID },
  "AdminService/RunTask": { roles: ADMIN, queues: BY_TASK_ID },
  "AdminService/ArchiveTask": { roles: ADMIN, queues: BY_TASK_ID },
  "AdminService/RetryTask": { roles: ADMIN, queues: BY_TASK_ID },
  "AdminService/SetQueueConcurrencyLimit": { roles: ADMIN, queues: QUEUE_FIELD },
  "AdminService/DeleteQueueConcurrencyLimit": { roles: ADMIN, queues: QUEUE_FIELD },
  "AdminService/SetQueueRateLimit": { roles: ADMIN, queues: QUEUE_FIELD },
  "AdminService/DeleteQueueRateLimit": { roles: ADMIN, queues: QUEUE_FIELD },
  "AdminService/SetGroupConfig": { roles: ADMIN, queues: named<SetGroupConfigRequest>("config.queue", (r) => (r.config ? [r.config.queue] : [])) },
  "AdminService/DeleteGroupConfig": { roles: ADMIN, queues: QUEUE_FIELD },
  // Rules set by an operator apply in every queue: only an unscoped admin changes them.
  "AdminService/SetStrategies": { roles: ADMIN, queues: everyQueue() },
  "AdminService/DeleteStrategies": { roles: ADMIN, queues: everyQueue() },
  "AdminService/SetSchedule": { roles: ADMIN, queues: named<SetScheduleRequest>("schedule.task.queue (empty: default)", (r) => specQueue(r.schedule?.task, DEFAULT_QUEUE)) },
  "AdminService/DeleteSchedule": { roles: ADMIN, queues: SCHEDULE_QUEUE },
  "AdminService/PauseSchedule": { roles: ADMIN, queues: SCHEDULE_QUEUE },
  "AdminService/ResumeSchedule": { roles: ADMIN, queues: SCHEDULE_QUEUE },
  "AdminService/RunScheduleNow": { roles: ADMIN, queues: SCHEDULE_QUEUE },
  "AdminService/DeleteQueue": { roles: ADMIN, queues: QUEUE_FIELD },
  "AdminService/BulkTaskAction": { roles: ADMIN, queues: QUEUE_FIELD },
  // Moving partitions moves every queue in them: an unscoped admin only.
  "AdminService/DrainNode": { roles: ADMIN, queues: everyQueue() },
  "AdminService/MovePartition": { roles: ADMIN, queues: everyQueue() },
  // Node-to-node: a handoff's rows, of every queue of a partition. Another node only.
  "ClusterService/AcceptPartition": { roles: ["node"], queues: everyQueue(), nodeOnly: true },
  // Node-to-node: a node's counts on shared rules (rules span queues), for the ledgers held here. Another node only.
  "ClusterService/ReportSlots": { roles: ["node"], queues: everyQueue(), nodeOnly: true },
};

/** The roles that may call `rpc` (admin among them unless it is node-to-node only); undefined for an RPC not in the table. */
export function rolesFor(rpc: string): readonly Role[] | undefined {
  const rule = RPC_TABLE[rpc];
  if (rule === undefined) return undefined;
  return rule.nodeOnly ? rule.roles : ["admin", ...rule.roles];
}

/** Which queues a call of `rpc` touches; undefined for an RPC not in the table. */
export const queueAccessOf = (rpc: string): QueueAccess | undefined => RPC_TABLE[rpc]?.queues;

/** Whether `rpc` changes state only an operator may change: these calls are audited. */
export const isAdminOnly = (rpc: string): boolean => RPC_TABLE[rpc]?.roles.length === 0 && !RPC_TABLE[rpc]?.nodeOnly;

/** GET /metrics (unless the auth file makes it public): the same as every other read, by an unscoped identity (its series span every queue). */
export const METRICS_ROLES: readonly Role[] = ["admin", "reader"];
