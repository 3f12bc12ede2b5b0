/**
 * Roles and THE table of which role each RPC needs. Every RPC of every conveyor service
 * is listed here once (test/unit/rpc-roles.test.ts walks the generated descriptors and
 * fails on a missing or unknown entry), so a new RPC cannot ship without a decision.
 * `admin` may call everything; the table names the other roles that may.
 */
export const ROLES = ["admin", "producer", "worker", "reader"] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (value: unknown): value is Role => (ROLES as readonly unknown[]).includes(value);

const READ: readonly Role[] = ["reader"];
const ADMIN: readonly Role[] = [];

/** `Service/Method` (the service's short name) → the roles besides `admin` that may call it. */
export const RPC_ROLES: Readonly<Record<string, readonly Role[]>> = {
  "TaskService/Enqueue": ["producer"],
  "TaskService/EnqueueBatch": ["producer"],
  "TaskService/EnqueueTx": ["producer"],
  // A producer reads back what it enqueued; a reader reads everything.
  "TaskService/GetTask": ["producer", "reader"],
  "TaskService/CancelTask": ["producer"],
  // Waiting for a task's end is reading it, later.
  "TaskService/WaitTask": ["producer", "reader"],

  "WorkerService/Lease": ["worker"],
  "WorkerService/Heartbeat": ["worker"],
  "WorkerService/Settle": ["worker"],
  "WorkerService/RegisterTaskTypes": ["worker"],

  "AdminService/ListQueues": READ,
  "AdminService/ListTasks": READ,
  "AdminService/GetTask": READ,
  "AdminService/ListConcurrencyLimits": READ,
  "AdminService/ListRateLimits": READ,
  "AdminService/ListGroupConfigs": READ,
  "AdminService/ListGroups": READ,
  "AdminService/ListStrategies": READ,
  "AdminService/GetClusterInfo": READ,
  "AdminService/ListWorkers": READ,
  "AdminService/GetActivity": READ,
  "AdminService/ListSchedules": READ,
  "AdminService/GetClusterStatus": READ,
  "AdminService/PauseQueue": ADMIN,
  "AdminService/ResumeQueue": ADMIN,
  "AdminService/CancelTask": ADMIN,
  "AdminService/DeleteTask": ADMIN,
  "AdminService/RunTask": ADMIN,
  "AdminService/ArchiveTask": ADMIN,
  "AdminService/RetryTask": ADMIN,
  "AdminService/SetQueueConcurrencyLimit": ADMIN,
  "AdminService/DeleteQueueConcurrencyLimit": ADMIN,
  "AdminService/SetQueueRateLimit": ADMIN,
  "AdminService/DeleteQueueRateLimit": ADMIN,
  "AdminService/SetGroupConfig": ADMIN,
  "AdminService/DeleteGroupConfig": ADMIN,
  "AdminService/SetStrategies": ADMIN,
  "AdminService/DeleteStrategies": ADMIN,
  "AdminService/SetSchedule": ADMIN,
  "AdminService/DeleteSchedule": ADMIN,
  "AdminService/PauseSchedule": ADMIN,
  "AdminService/ResumeSchedule": ADMIN,
  "AdminService/RunScheduleNow": ADMIN,
  "AdminService/DeleteQueue": ADMIN,
  "AdminService/BulkTaskAction": ADMIN,
  // Node-to-node: a handoff's rows. Admin only until nodes have an identity of their own.
  "ClusterService/AcceptPartition": ADMIN,
};

/** The roles that may call `rpc` (admin always among them); undefined for an RPC not in the table. */
export function rolesFor(rpc: string): readonly Role[] | undefined {
  const roles = RPC_ROLES[rpc];
  return roles === undefined ? undefined : ["admin", ...roles];
}

/** Whether `rpc` changes state only an operator may change: these calls are audited. */
export const isAdminOnly = (rpc: string): boolean => RPC_ROLES[rpc]?.length === 0;

/** GET /metrics (unless the auth file makes it public): the same as every other read. */
export const METRICS_ROLES: readonly Role[] = ["admin", "reader"];
