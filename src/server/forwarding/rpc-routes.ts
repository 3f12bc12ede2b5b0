/**
 * Where every RPC of every service is served in a cluster: one table, walked by a test
 * (every method of every service must have a route, as every method must have a role).
 *
 * - `here`: the receiving node answers (its own state: cluster status, node info; and the
 *   task-type rules, whose writes go to the cluster's rule set in etcd, which every member
 *   follows: server/rules/cluster-rules.ts).
 * - `queue`: the owner of the queue named in the request.
 * - `task`: the owner of the task's partition (server-made ids carry it, see task-ids.ts),
 *   then every other member when that owner does not have it (caller-chosen ids).
 * - `items`: requests whose items name queues (a batch enqueue, heartbeats, settles): the
 *   items are split by owner, each part is served by its owner, and the answers are put
 *   back in request order.
 * - `lease`: the Lease long poll (forwarder.ts explains how it splits).
 * - `every`: reads of the whole cluster; each member answers for the partitions it holds
 *   (`keep`), and the answers are merged.
 */
import type { MessageShape } from "@bufbuild/protobuf";
import type { ConveyorError } from "../../base/errors.js";
import { toItemError } from "../../rpc/status.js";
import type { ActivityBucket, GetActivityResponseSchema } from "../../gen/conveyor/v1/admin_service_pb.js";

type Msg = Record<string, unknown>;

export interface ItemsRoute {
  kind: "items";
  /** The queue of every item, in order. */
  queues(request: Msg): string[];
  /** The request restricted to the items at `indexes`. */
  pick(request: Msg, indexes: readonly number[]): Msg;
  /** The answer of the whole request from each part's answer (parts cover every index once). */
  merge(parts: ReadonlyArray<{ indexes: readonly number[]; response: Msg }>, count: number): Msg;
  /**
   * Indexes of the merged answer whose item failed only because its queue changed hands
   * while the call ran (WRONG_OWNER, RELOCATING): worth one more routing.
   */
  misrouted(response: Msg): number[];
  /**
   * The answer for `count` items of a part whose owner could not serve it (refused, or
   * unreachable), each item failing with `error`, when a failed part fails only its own
   * items; undefined when it fails the whole call.
   */
  failed?(count: number, error: ConveyorError): Msg;
}

/** Item errors that mean "routed to a node that no longer holds the queue", not a fault of the item. */
const MISROUTED = new Set(["WRONG_OWNER", "RELOCATING"]);
const itemErrorOf = (item: unknown, path: "outcome" | "error"): Msg | undefined => {
  const m = item as Msg | undefined;
  if (!m) return undefined;
  if (path === "error") return m["error"] as Msg | undefined;
  const outcome = m["outcome"] as { case?: string; value?: Msg } | undefined;
  return outcome?.case === "error" ? outcome.value : undefined;
};

export interface EveryRoute {
  kind: "every";
  /** This member's answer, restricted to what it holds (`holds(queue)`). */
  keep(response: Msg, holds: (queue: string) => boolean): Msg;
  merge(responses: readonly Msg[]): Msg;
}

export type RpcRoute =
  | { kind: "here" }
  | { kind: "queue"; queue(request: Msg): string }
  | { kind: "task"; id(request: Msg): string }
  | ItemsRoute
  | { kind: "lease" }
  | EveryRoute;

const here: RpcRoute = { kind: "here" };
const byQueue = (field = "queue"): RpcRoute => ({ kind: "queue", queue: (r) => String(r[field] ?? "") });
const byTaskId: RpcRoute = { kind: "task", id: (r) => String(r["id"] ?? "") };
/** A queue-scoped request whose queue may be left empty to mean every queue. */
const byQueueOrEvery = (every: EveryRoute): RpcRoute => ({ kind: "queue", queue: (r) => String(r["queue"] ?? ""), ...{ every } });

/**
 * Items of `list` under `field`, split and merged by index into `out` of the answer;
 * `errorAt` says where an answer item carries its error (none: items cannot fail alone).
 */
function itemsRoute(listField: string, queueOf: (item: Msg) => string, outField: string, errorAt?: "outcome" | "error", failedItem?: (error: ConveyorError) => Msg): ItemsRoute {
  return {
    kind: "items",
    ...(failedItem ? { failed: (count: number, error: ConveyorError) => ({ [outField]: Array.from({ length: count }, () => failedItem(error)) }) } : {}),
    misrouted: (response) => {
      if (!errorAt) return [];
      const out: number[] = [];
      ((response[outField] ?? []) as unknown[]).forEach((item, i) => {
        if (MISROUTED.has(String(itemErrorOf(item, errorAt)?.["reason"] ?? ""))) out.push(i);
      });
      return out;
    },
    queues: (r) => ((r[listField] ?? []) as Msg[]).map(queueOf),
    pick: (r, indexes) => ({ ...r, [listField]: indexes.map((i) => (r[listField] as Msg[])[i]) }),
    merge: (parts, count) => {
      const out: unknown[] = new Array(count);
      for (const { indexes, response } of parts) {
        const items = (response[outField] ?? []) as unknown[];
        indexes.forEach((i, k) => (out[i] = items[k]));
      }
      return { [outField]: out };
    },
  };
}

/**
 * Concatenates `field` of every answer, each member keeping the entries of queues it
 * holds (all of them when `queueOf` is undefined: node-local facts such as its workers).
 */
function concatEvery(field: string, queueOf: ((entry: Msg) => string) | undefined, extra?: (responses: readonly Msg[]) => Msg): EveryRoute {
  return {
    kind: "every",
    keep: (response, holds) => (queueOf === undefined ? response
      : { ...response, [field]: ((response[field] ?? []) as Msg[]).filter((e) => holds(queueOf(e))) }),
    // Fields besides the list (a server default, say) are node-wide settings: this node's answer has them.
    merge: (responses) => ({ ...responses[0], ...(extra ? extra(responses) : {}), [field]: responses.flatMap((r) => (r[field] ?? []) as Msg[]) }),
  };
}

/** Per-minute activity of every member, summed bucket by bucket (buckets are aligned to the minute on every node). */
const activityEvery: EveryRoute = {
  kind: "every",
  keep: (response) => response,
  merge: (responses) => {
    const byStart = new Map<bigint, ActivityBucket>();
    for (const r of responses as unknown as Array<MessageShape<typeof GetActivityResponseSchema>>) {
      for (const b of r.buckets) {
        const sum = byStart.get(b.startMs);
        if (!sum) byStart.set(b.startMs, { ...b });
        else {
          sum.enqueued += b.enqueued;
          sum.completed += b.completed;
          sum.retried += b.retried;
          sum.archived += b.archived;
        }
      }
    }
    const first = responses[0] as unknown as MessageShape<typeof GetActivityResponseSchema> | undefined;
    return { bucketMs: first?.bucketMs ?? 0n, buckets: [...byStart.values()].sort((a, b) => (a.startMs < b.startMs ? -1 : 1)) };
  },
};

/** A task spec's queue; an empty one means "default" (validate.ts), so it routes there. */
const queueOfSpec = (spec: Msg) => String(spec["queue"] || "default");

/** The route of every RPC, keyed "Service/Method" (as roles.ts). */
export const RPC_ROUTES: Readonly<Record<string, RpcRoute>> = {
  "TaskService/Enqueue": { kind: "queue", queue: (r) => queueOfSpec((r["task"] ?? {}) as Msg) },
  // A part that fails fails only its own items: the other parts were stored by their
  // owners, and answering the whole batch with the error would tell their callers
  // otherwise (a retry with server-made ids would enqueue them twice). Heartbeats and
  // settles fail as a whole instead: both are idempotent, and the SDK sends the whole call again.
  "TaskService/EnqueueBatch": itemsRoute("tasks", queueOfSpec, "items", "outcome", (e) => ({ outcome: { case: "error", value: toItemError(e) } })),
  // Atomic within one queue (the service refuses mixed queues): the first task's queue.
  "TaskService/EnqueueTx": { kind: "queue", queue: (r) => queueOfSpec(((r["tasks"] as Msg[] | undefined) ?? [])[0] ?? {}) },
  "TaskService/GetTask": byTaskId,
  "TaskService/CancelTask": byTaskId,
  "TaskService/WaitTask": byTaskId,

  "WorkerService/Lease": { kind: "lease" },
  "WorkerService/Heartbeat": itemsRoute("leases", (l) => String(l["queue"] ?? ""), "leases"),
  "WorkerService/Settle": itemsRoute("settlements", (s) => String(s["queue"] ?? ""), "results", "error"),
  "WorkerService/RegisterTaskTypes": here,

  "AdminService/ListQueues": concatEvery("queues", (q) => String(q["name"] ?? "")),
  "AdminService/PauseQueue": byQueue(),
  "AdminService/ResumeQueue": byQueue(),
  "AdminService/ListTasks": byQueue(),
  "AdminService/GetTask": byTaskId,
  "AdminService/CancelTask": byTaskId,
  "AdminService/DeleteTask": byTaskId,
  "AdminService/RunTask": byTaskId,
  "AdminService/ArchiveTask": byTaskId,
  "AdminService/RetryTask": byTaskId,
  "AdminService/SetQueueConcurrencyLimit": byQueue(),
  "AdminService/DeleteQueueConcurrencyLimit": byQueue(),
  "AdminService/ListConcurrencyLimits": concatEvery("limits", (l) => String(l["queue"] ?? "")),
  "AdminService/SetQueueRateLimit": byQueue(),
  "AdminService/DeleteQueueRateLimit": byQueue(),
  "AdminService/ListRateLimits": concatEvery("limits", (l) => String(l["queue"] ?? "")),
  "AdminService/SetGroupConfig": { kind: "queue", queue: (r) => String(((r["config"] ?? {}) as Msg)["queue"] ?? "") },
  "AdminService/ListGroupConfigs": byQueueOrEvery(concatEvery("configs", (c) => String(c["queue"] ?? ""))),
  "AdminService/DeleteGroupConfig": byQueue(),
  "AdminService/ListGroups": byQueueOrEvery(concatEvery("groups", (g) => String(g["queue"] ?? ""))),
  "AdminService/ListStrategies": here,
  "AdminService/SetStrategies": here,
  "AdminService/DeleteStrategies": here,
  "AdminService/GetClusterInfo": here,
  // Each node lists the workers connected to it; a worker polling several nodes appears once per node.
  "AdminService/ListWorkers": concatEvery("workers", undefined),
  "AdminService/GetActivity": byQueueOrEvery(activityEvery),
  "AdminService/SetSchedule": { kind: "queue", queue: (r) => queueOfSpec((((r["schedule"] ?? {}) as Msg)["task"] ?? {}) as Msg) },
  "AdminService/ListSchedules": byQueueOrEvery(concatEvery("schedules", (s) => queueOfSpec((s["task"] ?? {}) as Msg))),
  "AdminService/DeleteSchedule": byQueue(),
  "AdminService/PauseSchedule": byQueue(),
  "AdminService/ResumeSchedule": byQueue(),
  "AdminService/RunScheduleNow": byQueue(),
  "AdminService/GetClusterStatus": here,
  "AdminService/DeleteQueue": byQueue(),
  "AdminService/BulkTaskAction": byQueue(),
  // Written to etcd by whichever node receives them; every node's rebalancer acts on them.
  "AdminService/DrainNode": here,
  "AdminService/MovePartition": here,
};

/** For a `queue` route built by byQueueOrEvery: the fan-out used when the queue is left empty. */
export function everyWhenNoQueue(route: RpcRoute): EveryRoute | undefined {
  return (route as { every?: EveryRoute }).every;
}

