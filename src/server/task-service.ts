/** TaskService: translates producer calls to grain operations. No logic lives here. */
import { create } from "@bufbuild/protobuf";
import { toItemError } from "../rpc/status.js";
import { ConveyorError, asStorageFailure, invalidField } from "../base/errors.js";
import { quote } from "../base/limits.js";
import type { EnqueueOutcome } from "../grains/queue/queue-core.js";
import type { NewTask } from "../grains/queue/task.js";
import { TaskService } from "../gen/conveyor/v1/task_service_pb.js";
import { EnqueueResultSchema, type TaskSpec } from "../gen/conveyor/v1/task_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import { stateToWire, taskToWire } from "./convert.js";
import type { NodeContext } from "./node-context.js";
import { BATCH_MAX, checkTaskId, validateSpec } from "./validate.js";
import { WorkSlicer, chunksBy } from "./work-slicer.js";
import { ENQUEUE_TX_MAX_BYTES, WORK_SLICE_BYTES } from "../base/limits.js";

/**
 * Tasks per grain turn when a batch is admitted in slices (a few milliseconds of work,
 * and at most WORK_SLICE_BYTES of payload); EnqueueTx admits all its tasks in one turn
 * (that is what makes it atomic).
 */
const ADMIT_CHUNK = 100;

export function taskService(ctx: NodeContext): UnaryImpl<typeof TaskService> {
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
   * when atomic, otherwise ADMIT_CHUNK per turn, yielding between slices of work.
   */
  async function admit(tasks: Array<NewTask | ConveyorError>, atomic: boolean, slicer?: WorkSlicer): Promise<Array<EnqueueOutcome>> {
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
    // The items written since the last commit point: a failed commit fails exactly them.
    let slice: number[] = [];
    const failSlice = (error: unknown) => {
      if (error === undefined) return;
      const failure = asStorageFailure(error);
      for (const i of slice) out[i] = { ok: false, error: failure };
    };
    for (const [queue, indexes] of byQueue) {
      const payloadBytes = (i: number) => (tasks[i] as NewTask).payload.byteLength;
      for (const part of atomic ? [indexes] : chunksBy(indexes, ADMIT_CHUNK, WORK_SLICE_BYTES, payloadBytes)) {
        const outcomes = enqueueInQueue(queue, part.map((i) => tasks[i] as NewTask), atomic);
        slicer?.wrote(part.reduce((n, i) => n + payloadBytes(i), 0));
        outcomes.forEach((o, k) => (out[part[k]!] = o));
        slice.push(...part);
        const admitted = outcomes.filter((o) => o.ok && !o.existed).length;
        if (admitted > 0) ctx.metrics.enqueued.inc({ queue }, admitted);
        if (slicer?.due()) {
          failSlice(await slicer.yield());
          slice = [];
        }
      }
    }
    if (slicer) failSlice(await slicer.finish());
    return out;
  }

  /**
   * One grain turn for a queue's tasks. The turn's writes are all or nothing, so when the
   * data file refuses one task's values (STORAGE_REJECTED) a non-atomic call admits its
   * tasks again one per turn: the refused task fails alone and its neighbours succeed.
   * Any other storage failure (disk full, I/O) is every task's, and each gets it.
   */
  function enqueueInQueue(queue: string, items: NewTask[], atomic: boolean): EnqueueOutcome[] {
    const grain = ctx.router.grainFor(queue);
    try {
      return grain.enqueue(items, atomic);
    } catch (error) {
      if (atomic || !(error instanceof ConveyorError)) throw error;
      if (items.length > 1 && error.reason === "STORAGE_REJECTED") {
        return items.flatMap((item) => enqueueInQueue(queue, [item], false));
      }
      return items.map(() => ({ ok: false as const, error }));
    }
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
      await ctx.committed();
      return { result: toResult(outcome!, task.queue) };
    },

    async enqueueBatch(call) {
      checkBatchSize(call.request.tasks.length);
      const slicer = new WorkSlicer(ctx.committed);
      const tasks = await validateAll(call.request.tasks, false, slicer);
      // Sliced: admit waits for the commit of every slice it wrote (the last one too).
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
      await ctx.committed();
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
