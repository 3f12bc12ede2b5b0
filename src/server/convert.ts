/**
 * Domain → wire conversions (the wire carries int64 as bigint). They build init shapes,
 * not messages: the hot responses are encoded straight from them (rpc/fast-encode.ts),
 * and `create()` here would deep-copy each task for nothing (~4 µs of a delivery's ~16).
 * A field left out is its zero value, whichever encoder writes the answer.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { TaskRecord, TaskState } from "../grains/queue/task.js";
import type { AttemptSchema, EnqueueResultSchema, TaskSchema, TaskState as WireState } from "../gen/conveyor/v1/task_pb.js";
import type { DeliverySchema } from "../gen/conveyor/v1/worker_service_pb.js";
import type { AttemptRecord } from "../grains/queue/attempts.js";
import type { LeasedDelivery } from "../grains/queue/queue-grain.js";
import { stateFromWire as wireStateName, stateToWire as wireState, type TaskStateName } from "../rpc/wire-names.js";

/** The grain's state union and the wire enum's names are one list (compile-time check). */
const sameStates: [TaskState] extends [TaskStateName] ? ([TaskStateName] extends [TaskState] ? true : never) : never = true;
void sameStates;

export const stateToWire = (s: TaskState): WireState => wireState(s);

export const stateFromWire = (s: WireState): TaskState | undefined => wireStateName(s);

const big = (n: number) => BigInt(Math.round(n));

export type TaskWire = MessageInitShape<typeof TaskSchema>;

export function taskToWire(t: TaskRecord, options: { withPayload: boolean } = { withPayload: true }): TaskWire {
  return {
    id: t.id, queue: t.queue, type: t.type, payload: options.withPayload ? t.payload : new Uint8Array(),
    contentType: t.contentType, metadata: t.metadata, state: stateToWire(t.state), priority: t.priority,
    maxRetry: t.maxRetry, retried: t.retried, createdAtMs: big(t.createdAtMs), readyAtMs: big(t.readyAtMs),
    timeoutMs: big(t.timeoutMs), deadlineAtMs: big(t.deadlineAtMs), expiresAtMs: big(t.expiresAtMs),
    uniqueKey: t.uniqueKey, concurrencyKey: t.concurrencyKey, group: t.group, lastError: t.lastError,
    lastFailedAtMs: big(t.lastFailedAtMs), finishedAtMs: big(t.finishedAtMs), result: t.result,
    cancelReason: t.cancelReason, leaseId: t.leaseId, leaseExpiresAtMs: big(t.leaseExpiresAtMs),
    retentionMs: big(t.retentionMs),
  };
}

export function attemptToWire(a: AttemptRecord): MessageInitShape<typeof AttemptSchema> {
  return {
    number: a.number, startedAtMs: big(a.startedAtMs), endedAtMs: big(a.endedAtMs), workerId: a.workerId,
    outcome: a.outcome, error: a.error, stack: a.stack,
  };
}

export function deliveryToWire(d: LeasedDelivery): MessageInitShape<typeof DeliverySchema> {
  return {
    leaseId: d.leaseId, queue: d.queue, leaseExpiresAtMs: BigInt(d.leaseExpiresAtMs),
    deadlineAtMs: BigInt(d.deadlineAtMs), tasks: d.tasks.map((t) => taskToWire(t)), batch: d.batch, group: d.group,
  };
}

/** One admitted task's short answer. */
export function enqueueResultToWire(o: { id: string; state: TaskState; existed: boolean }, queue: string): MessageInitShape<typeof EnqueueResultSchema> {
  return { id: o.id, queue, state: stateToWire(o.state), existed: o.existed };
}
