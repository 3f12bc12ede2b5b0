/** The conveyor SDK: what `import { ... } from "@conveyor-dev/conveyor"` gives you. */
export { Client, type ClientOptions, type TaskInfo, type TaskResult } from "./sdk/client.js";
export { Worker, type WorkerOptions, type WorkerLogger } from "./sdk/worker.js";
export type { ConnectionOptions } from "./sdk/connection.js";
export {
  Admin, type AdminOptions, type QueueInfo, type QueueNameHint, type StateCounts, type TaskPage, type ConcurrencyLimitInfo, type RateLimitInfo,
  type GroupConfigInfo, type GroupInfo, type TaskTypeRulesInfo, type ClusterInfo,
} from "./sdk/admin.js";
export type { AttemptView, AttemptOutcome, TaskDetail } from "./sdk/attempts.js";
export type { ClusterStatus, MemberView, PartitionView, DrainResult, MoveResult } from "./sdk/cluster-views.js";
export type { WorkerView, Activity, ActivityBucketView, BulkActionName } from "./sdk/operations-views.js";
export {
  Mux, type Handler, type BatchHandler, type HandlerContext, type HandleOptions, type ConcurrencyRuleSpec, type ConcurrencyStrategy,
} from "./sdk/mux.js";
export { skipRetry, isSkipRetry, BatchError, ConveyorError, TaskFailedError, WaitTimeoutError } from "./sdk/errors.js";
export {
  newTask, json, bytes,
  type NewTaskSpec, type Payload, type EnqueueOptions, type TaskView, type TaskState, type Duration,
} from "./sdk/task.js";
export type { ErrorCode, ErrorReason } from "./base/errors.js";
export { Schedules, type ScheduleOptions, type ScheduleTaskOptions, type ScheduleView } from "./sdk/schedules.js";
