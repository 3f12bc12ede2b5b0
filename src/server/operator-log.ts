/**
 * One log line per operator action (pause, resume, limits, group thresholds, strategies,
 * task actions), whether it came over gRPC or the dashboard's JSON API: both call the
 * AdminService implementation this wraps. A line names the action, the queue, the target
 * and the values set, and the caller's address; a refused action is logged with its
 * error code. Reads are not logged.
 *
 * Every AdminService method is listed here as an action or a read (a unit test checks
 * the proto), so a new method cannot slip by unlogged.
 */
import type { Logger } from "pino";
import { ConveyorError } from "../base/errors.js";
import { AdminService } from "../gen/conveyor/v1/admin_service_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";

type Admin = UnaryImpl<typeof AdminService>;
type Method = keyof Admin;
type Request<M extends Method> = Parameters<Admin[M]>[0]["request"];
type Response<M extends Method> = Awaited<ReturnType<Admin[M]>>;

/** What a log line says of one action: the queue, the target, and the values it set. */
interface ActionFields {
  queue?: string | undefined;
  target?: string | undefined;
  [value: string]: unknown;
}

type Describe<M extends Method> = (request: Request<M>, response: Response<M> | undefined) => ActionFields;

/** The queue a task action's response names (a deleted task's row is gone: no queue). */
const taskQueue = (response: { task?: { queue?: string | undefined } | undefined } | undefined): ActionFields =>
  response?.task?.queue ? { queue: response.task.queue } : {};

export const OPERATOR_ACTIONS: { [M in Method]?: Describe<M> } = {
  pauseQueue: (r) => ({ queue: r.queue }),
  resumeQueue: (r) => ({ queue: r.queue }),
  cancelTask: (r, res) => ({ ...taskQueue(res), target: r.id }),
  deleteTask: (r) => ({ target: r.id }),
  runTask: (r, res) => ({ ...taskQueue(res), target: r.id }),
  archiveTask: (r, res) => ({ ...taskQueue(res), target: r.id }),
  retryTask: (r, res) => ({ ...taskQueue(res), target: r.id }),
  setQueueConcurrencyLimit: (r) => ({ queue: r.queue, max: r.max }),
  deleteQueueConcurrencyLimit: (r) => ({ queue: r.queue }),
  setQueueRateLimit: (r) => ({ queue: r.queue, ratePerSec: r.ratePerSec, burst: r.burst }),
  deleteQueueRateLimit: (r) => ({ queue: r.queue }),
  setGroupConfig: (r) => ({
    queue: r.config?.queue, target: r.config?.group || "(queue default)",
    maxSize: r.config?.maxSize, maxDelayMs: Number(r.config?.maxDelayMs ?? 0n), graceMs: Number(r.config?.graceMs ?? 0n),
  }),
  deleteGroupConfig: (r) => ({ queue: r.queue, target: r.group || "(queue default)" }),
  setStrategies: (r) => ({ target: r.type, rules: r.rules.length }),
  deleteStrategies: (r) => ({ target: r.type }),
  setSchedule: (r) => ({
    queue: r.schedule?.task?.queue, target: r.schedule?.name,
    ...(r.schedule?.cadence.case === "cron" ? { cron: r.schedule.cadence.value, timeZone: r.schedule.timeZone || "UTC" } : {}),
    ...(r.schedule?.cadence.case === "intervalMs" ? { intervalMs: Number(r.schedule.cadence.value) } : {}),
  }),
  deleteSchedule: (r) => ({ queue: r.queue, target: r.name }),
  pauseSchedule: (r) => ({ queue: r.queue, target: r.name }),
  resumeSchedule: (r) => ({ queue: r.queue, target: r.name }),
  deleteQueue: (r, res) => ({ queue: r.queue, ...(res ? { deletedTasks: Number(res.deletedTasks) } : {}) }),
  bulkTaskAction: (r, res) => ({ queue: r.queue, action: r.action, state: r.state, ...(res ? { affected: Number(res.affected) } : {}) }),
  runScheduleNow: (r, res) => ({ queue: r.queue, target: r.name, ...(res ? { taskId: res.taskId } : {}) }),
  drainNode: (r, res) => ({ target: r.nodeId, undo: r.undo, ...(res ? { partitionsLeft: res.partitionsLeft, finished: res.finished } : {}) }),
  movePartition: (r, res) => ({
    target: String(r.partition), ...(r.unpin ? { unpin: true } : { to: r.toNodeId }), ...(res ? { from: res.fromNodeId, finished: res.finished } : {}),
  }),
};

export const OPERATOR_READS: ReadonlySet<Method> = new Set<Method>([
  "listQueues", "listTasks", "getTask", "listConcurrencyLimits", "listRateLimits", "listGroupConfigs", "listGroups",
  "listStrategies", "getClusterInfo", "listWorkers", "getActivity", "listSchedules", "getClusterStatus",
]);

/** `impl` with a log line after each operator action, done or refused. */
export function withOperatorLog(impl: Admin, logger: Logger): Admin {
  const logged: Record<string, unknown> = { ...impl };
  for (const [method, describe] of Object.entries(OPERATOR_ACTIONS) as Array<[Method, Describe<Method>]>) {
    const handler = impl[method] as unknown as (call: { request: never; getPeer(): string }) => Promise<unknown>;
    logged[method] = async (call: { request: never; getPeer(): string }) => {
      const action = AdminService.method[method].name;
      const peer = call.getPeer();
      try {
        const response = await handler.call(impl, call);
        logger.info({ action, ...describe(call.request, response as never), peer }, `operator action ${action}`);
        return response;
      } catch (error) {
        const code = error instanceof ConveyorError ? error.code : "INTERNAL";
        logger.info({ action, ...safeDescribe(describe, call.request), peer, refused: code }, `operator action ${action} refused`);
        throw error;
      }
    };
  }
  return logged as Admin;
}

/** A refused request may lack what describe reads (e.g. no config): log what there is. */
function safeDescribe(describe: Describe<Method>, request: never): ActionFields {
  try {
    return describe(request, undefined);
  } catch {
    return {};
  }
}
