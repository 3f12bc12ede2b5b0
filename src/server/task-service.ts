/** TaskService: translates producer calls to grain operations. No logic lives here. */
import { toItemError } from "../rpc/status.js";
import { ConveyorError, asStorageFailure, invalidField } from "../base/errors.js";
import { quote } from "../base/limits.js";
import type { EnqueueOutcome } from "../grains/queue/queue-core.js";
import type { NewTask } from "../grains/queue/task.js";
import { TaskService } from "../gen/conveyor/v1/task_service_pb.js";
import type { TaskSpec } from "../gen/conveyor/v1/task_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import { attemptToWire, enqueueResultToWire, taskToWire } from "./convert.js";
import type { Clock } from "../base/clock.js";
import type { Router } from "../cluster/router.js";
import type { NodeMetrics } from "./metrics.js";
import type { RuleRegistry } from "./rules/rule-registry.js";
import type { TaskAccess } from "./task-access.js";
import type { TaskDefaults } from "./validate.js";
import { BATCH_MAX, checkTaskId, validateSpec } from "./validate.js";
import { WorkSlicer, chunksBy } from "./work-slicer.js";
import { ENQUEUE_TX_MAX_BYTES, WAIT_TASK_MAX_MS, WORK_SLICE_BYTES } from "../base/limits.js";
import { FINISHED_STATES } from "../grains/queue/task.js";
import type { TaskWaiters } from "./task-waiters.js";

/**
 * Tasks per grain turn when a batch is admitted in slices (a few milliseconds of work,
 * and at most WORK_SLICE_BYTES of payload); EnqueueTx admits all its tasks in one turn
 * (that is what makes it atomic).
 */
const ADMIT_CHUNK = 100;

/** What TaskService uses, and nothing else. */
export interface TaskServiceDeps extends TaskAccess {
  router: Pick<Router, "grainFor">;
  /** Concurrency rules of task types, evaluated at enqueue. */
  rules: Pick<RuleRegistry, "evaluate">;
  metrics: Pick<NodeMetrics, "countEnqueued">;
  taskDefaults: TaskDefaults;
  clock: Pick<Clock, "nowMs">;
  /** A new task id for a task of `queue` (server-made ids carry the queue's partition: cluster/task-ids.ts). */
  newTaskId: (queue: string) => string;
  /** Where WaitTask parks until its task ends. */
  waiters: Pick<TaskWaiters, "wait">;
}

export function taskService(ctx: TaskServiceDeps): UnaryImpl<typeof TaskService> {
  /** Validates a spec and evaluates its type's concurrency rules (group members have none). */
  const validate = (spec: TaskSpec | undefined, field: string): NewTask => {
    const task = validateSpec(spec, field, ctx.taskDefaults, ctx.clock.nowMs(), ctx.newTaskId);
    if (task.group !== "") return task;
    const { rules, error } = ctx.rules.evaluate(task.type, task.payload, task.metadata, field);
    return { ...task, rules, ruleError: error };
  };

  /**
   * Validates a batch's specs in order, yielding between slices of work. A bad spec
   * becomes its error in the answer, or (atomic) fails the call.
   */
  async function validateAll(specs: readonly TaskSpec[], atomic: boolean, slicer: WorkSlicer): Promise<Array<NewTask | ConveyorError>> {
    const out: Array<NewTask | ConveyorError> = [];
    for (const [i, spec] of specs.entries()) {
      try {
        out.push(validate(spec, `tasks[${i}]`));
      } catch (e) {
        if (atomic || !(e instanceof ConveyorError)) throw e;
        out.push(e);
      }
      if (slicer.due()) await slicer.yield();
    }
    return out;
  }

  /**
   * Admits tasks queue by queue, keeping request order: all of them in one grain turn
   * when atomic, otherwise ADMIT_CHUNK per turn, yielding between slices of work. Each
   * turn's promise resolves after its commit; resolves once all of them have. A chunk
   * whose commit failed fails exactly its items (non-atomic); an atomic call rejects.
   */
  async function admit(tasks: Array<NewTask | ConveyorError>, atomic: boolean, slicer = new WorkSlicer()): Promise<EnqueueOutcome[]> {
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
    // One promise per grain turn: each settles once that turn's commit has.
    const turns: Promise<void>[] = [];
    for (const [queue, indexes] of byQueue) {
      const payloadBytes = (i: number) => (tasks[i] as NewTask).payload.byteLength;
      for (const part of atomic ? [indexes] : chunksBy(indexes, ADMIT_CHUNK, WORK_SLICE_BYTES, payloadBytes)) {
        const turn = enqueueInQueue(queue, part.map((i) => tasks[i] as NewTask), atomic).then((outcomes) => {
          outcomes.forEach((o, k) => (out[part[k]!] = o));
          const admitted = outcomes.filter((o) => o.ok && !o.existed).length;
          if (admitted > 0) ctx.metrics.countEnqueued(queue, admitted);
        }, (error: unknown) => {
          if (atomic) throw error;
          // This chunk's commit failed: exactly its items were not admitted.
          const failure = asStorageFailure(error);
          for (const i of part) out[i] = { ok: false, error: failure };
        });
        // Handled now, awaited below: no rejection goes unhandled while the loop yields.
        turn.catch(() => {});
        turns.push(turn);
        slicer.wrote(part.reduce((n, i) => n + payloadBytes(i), 0));
        if (slicer.due()) await slicer.yield();
      }
    }
    await Promise.all(turns);
    return out;
  }

  /**
   * One queue's tasks, through its ref (which admits a refused task alone, see QueueRef).
   * A queue this node cannot route to fails its tasks of a non-atomic call, not the call;
   * the promise rejects when the turn's commit fails.
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

  const toResult = (o: Extract<EnqueueOutcome, { ok: true }>, queue: string) => enqueueResultToWire(o, queue);

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
      const slicer = new WorkSlicer();
      const tasks = await validateAll(call.request.tasks, false, slicer);
      // Sliced: admit resolves once the commit of every slice it wrote has settled.
      const outcomes = await admit(tasks, false, slicer);
      return {
        items: outcomes.map((o, i) => o.ok
          ? { outcome: { case: "result" as const, value: toResult(o, (tasks[i] as NewTask).queue) } }
          : { outcome: { case: "error" as const, value: toItemError(o.error) } }),
      };
    },

    async enqueueTx(call) {
      checkBatchSize(call.request.tasks.length);
      const txBytes = call.request.tasks.reduce((n, t) => n + t.payload.byteLength, 0);
      if (txBytes > ENQUEUE_TX_MAX_BYTES) {
        throw invalidField("tasks", `carry ${txBytes} bytes of payload; an EnqueueTx (one transaction) carries at most ${ENQUEUE_TX_MAX_BYTES}: use EnqueueBatch`);
      }
      const tasks = (await validateAll(call.request.tasks, true, new WorkSlicer())) as NewTask[];
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
      const task = ctx.getTaskOrThrow(checkTaskId(call.request.id, "id"));
      return { task: taskToWire(task), attempts: ctx.attemptsOf(task.id).map(attemptToWire) };
    },

    async cancelTask(call) {
      const task = await ctx.actOnTask(checkTaskId(call.request.id, "id"), "cancel");
      return task ? { task: taskToWire(task) } : {};
    },

    async waitTask(call) {
      const id = checkTaskId(call.request.id, "id");
      const timeoutMs = call.request.timeoutMs;
      if (timeoutMs < 1 || timeoutMs > WAIT_TASK_MAX_MS) {
        throw invalidField("timeout_ms", `is ${timeoutMs}; it must be 1..${WAIT_TASK_MAX_MS} ms (wait longer by calling again)`);
      }
      const abort = new AbortController();
      call.on("cancelled", () => abort.abort());
      // Parked before the read: a task that ends in between still wakes this call.
      const { ended, cancel } = ctx.waiters.wait(id, timeoutMs, abort.signal);
      let task;
      try {
        task = ctx.getTaskOrThrow(id);
      } catch (error) {
        cancel();
        throw error;
      }
      if (!FINISHED_STATES.has(task.state)) {
        await ended;
        task = ctx.getTaskOrThrow(id);
      } else {
        cancel();
      }
      return { task: taskToWire(task), finished: FINISHED_STATES.has(task.state) };
    },
  };
}
