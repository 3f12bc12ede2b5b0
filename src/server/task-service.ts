/** TaskService: translates producer calls to grain operations. No logic lives here. */
import { create } from "@bufbuild/protobuf";
import { ConveyorError, invalidField } from "../base/errors.js";
import { quote } from "../base/limits.js";
import type { EnqueueOutcome } from "../grains/queue/queue-core.js";
import type { NewTask } from "../grains/queue/task.js";
import { TaskService } from "../gen/conveyor/v1/task_service_pb.js";
import { EnqueueResultSchema, ItemErrorSchema, type TaskSpec } from "../gen/conveyor/v1/task_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import { stateToWire, taskToWire } from "./convert.js";
import type { Clock } from "../base/clock.js";
import type { Router } from "../cluster/router.js";
import { grpcCodeOf } from "../rpc/status.js";
import type { NodeMetrics } from "./metrics.js";
import type { RuleRegistry } from "./rules/rule-registry.js";
import type { TaskAccess } from "./task-access.js";
import type { TaskDefaults } from "./validate.js";
import { BATCH_MAX, checkTaskId, validateSpec } from "./validate.js";

/** What TaskService uses, and nothing else. */
export interface TaskServiceDeps extends TaskAccess {
  router: Pick<Router, "grainFor">;
  /** Concurrency rules of task types, evaluated at enqueue. */
  rules: Pick<RuleRegistry, "evaluate">;
  metrics: Pick<NodeMetrics, "enqueued">;
  taskDefaults: TaskDefaults;
  clock: Pick<Clock, "nowMs">;
  newTaskId: () => string;
}

export function taskService(ctx: TaskServiceDeps): UnaryImpl<typeof TaskService> {
  /** Validates a spec and evaluates its type's concurrency rules (group members have none). */
  const validate = (spec: TaskSpec | undefined, field: string): NewTask => {
    const task = validateSpec(spec, field, ctx.taskDefaults, ctx.clock.nowMs(), ctx.newTaskId);
    if (task.group !== "") return task;
    const { rules, error } = ctx.rules.evaluate(task.type, task.payload, task.metadata);
    return { ...task, rules, ruleError: error };
  };

  /**
   * Admits tasks queue by queue (one grain turn per queue, all started in this event-loop
   * turn so they share one commit), keeping request order. Resolves after the commit.
   */
  async function admit(tasks: Array<NewTask | ConveyorError>, atomic: boolean): Promise<EnqueueOutcome[]> {
    const out: EnqueueOutcome[] = new Array(tasks.length);
    const byQueue = new Map<string, number[]>();
    tasks.forEach((t, i) => {
      if (t instanceof ConveyorError) {
        out[i] = { ok: false, error: t };
        return;
      }
      const list = byQueue.get(t.queue) ?? [];
      list.push(i);
      byQueue.set(t.queue, list);
    });
    await Promise.all([...byQueue].map(async ([queue, indexes]) => {
      const outcomes = await enqueueInQueue(queue, indexes.map((i) => tasks[i] as NewTask), atomic);
      outcomes.forEach((o, k) => (out[indexes[k]!] = o));
      const admitted = outcomes.filter((o) => o.ok && !o.existed).length;
      if (admitted > 0) ctx.metrics.enqueued.inc({ queue }, admitted);
    }));
    return out;
  }

  /**
   * One queue's tasks, through its ref (which admits a refused task alone, see QueueRef).
   * A queue this node cannot route to fails its tasks of a non-atomic call, not the call;
   * a failed commit fails the call.
   */
  function enqueueInQueue(queue: string, items: NewTask[], atomic: boolean): Promise<EnqueueOutcome[]> {
    let ref;
    try {
      ref = ctx.router.grainFor(queue);
    } catch (error) {
      if (atomic || !(error instanceof ConveyorError)) throw error;
      return Promise.resolve(items.map(() => ({ ok: false as const, error })));
    }
    return ref.enqueue(items, atomic);
  }

  const toResult = (o: Extract<EnqueueOutcome, { ok: true }>, queue: string) =>
    create(EnqueueResultSchema, { id: o.id, queue, state: stateToWire(o.state), existed: o.existed });

  function checkBatchSize(n: number) {
    if (n < 1 || n > BATCH_MAX) throw invalidField("tasks", `must hold 1..${BATCH_MAX} tasks, got ${n}`);
  }

  return {
    async enqueue(call) {
      const task = validate(call.request.task, "task");
      const [outcome] = await admit([task], false);
      if (!outcome!.ok) throw outcome!.error;
      return { result: toResult(outcome!, task.queue) };
    },

    async enqueueBatch(call) {
      checkBatchSize(call.request.tasks.length);
      const tasks = call.request.tasks.map((spec, i) => {
        try {
          return validate(spec, `tasks[${i}]`);
        } catch (e) {
          if (e instanceof ConveyorError) return e;
          throw e;
        }
      });
      const outcomes = await admit(tasks, false);
      return {
        items: outcomes.map((o, i) => o.ok
          ? { outcome: { case: "result" as const, value: toResult(o, (tasks[i] as NewTask).queue) } }
          : { outcome: { case: "error" as const, value: create(ItemErrorSchema, {
              code: grpcCodeOf(o.error.code), reason: o.error.reason, message: o.error.message, field: o.error.field ?? "" }) } }),
      };
    },

    async enqueueTx(call) {
      checkBatchSize(call.request.tasks.length);
      const tasks = call.request.tasks.map((spec, i) => validate(spec, `tasks[${i}]`));
      const queue = tasks[0]!.queue;
      const other = tasks.findIndex((t) => t.queue !== queue);
      if (other >= 0) {
        throw invalidField(`tasks[${other}].queue`, `EnqueueTx is atomic within one queue; got ${quote(tasks[other]!.queue)} after ${quote(queue)}`);
      }
      const outcomes = await admit(tasks, true);
      const failed = outcomes.findIndex((o) => !o.ok);
      if (failed >= 0) {
        const error = (outcomes[failed] as { error: ConveyorError }).error;
        throw new ConveyorError(error.code, error.reason, `tasks[${failed}]: ${error.message} (nothing was enqueued)`, error.field);
      }
      return { results: outcomes.map((o) => toResult(o as Extract<EnqueueOutcome, { ok: true }>, queue)) };
    },

    async getTask(call) {
      return { task: taskToWire(ctx.getTaskOrThrow(checkTaskId(call.request.id, "id"))) };
    },

    async cancelTask(call) {
      const task = await ctx.actOnTask(checkTaskId(call.request.id, "id"), "cancel");
      return task ? { task: taskToWire(task) } : {};
    },
  };
}
