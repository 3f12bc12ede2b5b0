import type { Clock } from "../base/clock.js";
import type { ErrorCode } from "../base/errors.js";
import type { Router } from "../cluster/router.js";
import type { LeaseBroker } from "../grains/runtime/lease-broker.js";
import type { GrainHost } from "../grains/runtime/grain-host.js";
import type { TaskAction } from "../grains/queue/queue-grain.js";
import type { TaskRecord } from "../grains/queue/task.js";
import type { AdminQueries } from "../storage/admin-queries.js";
import type { TaskStore } from "../storage/task-store.js";
import type { NodeConfig } from "./config.js";
import type { NodeMetrics } from "./metrics.js";
import type { RuleRegistry } from "./rules/rule-registry.js";
import type { TaskDefaults } from "./validate.js";

/** What the gRPC services of a node share; built by the composition root (node.ts). */
export interface NodeContext {
  config: NodeConfig;
  startedAtMs: number;
  clock: Clock;
  router: Router;
  broker: LeaseBroker;
  /** Concurrency rules of task types (evaluated at enqueue). */
  rules: RuleRegistry;
  /** For live views of grains in memory (never to route calls: use `router`). */
  host: GrainHost;
  store: TaskStore;
  queries: AdminQueries;
  metrics: NodeMetrics;
  taskDefaults: TaskDefaults;
  newTaskId: () => string;
  grpcCode: (code: ErrorCode) => number;
  /** Resolves once every write so far is durable; await it before replying. */
  committed: () => Promise<void>;
  getTaskOrThrow: (id: string) => TaskRecord;
  /** Runs an action on a task through its grain and returns the task afterwards (durable). */
  actOnTask: (id: string, action: TaskAction) => Promise<TaskRecord | undefined>;
}
