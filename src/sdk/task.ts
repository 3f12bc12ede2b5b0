/**
 * What SDK users build and read: task specs, payload helpers, and a friendly view of a
 * stored task (numbers and Dates instead of wire bigints).
 */
import { parseDurationMs } from "../base/duration.js";
import type { TaskState as DomainState } from "../base/task-state.js";
import type { TaskState as WireState, Task, TaskSpec } from "../gen/conveyor/v1/task_pb.js";
import { stateFromWire } from "../rpc/wire-names.js";
import { create } from "@bufbuild/protobuf";
import { TaskSpecSchema } from "../gen/conveyor/v1/task_pb.js";

/** A task's state; "unknown" when the server sent one this SDK does not know. */
export type TaskState = DomainState | "unknown";

/** Milliseconds, or a string such as "500ms", "30s", "5m", "1h". */
export type Duration = number | string;

export interface Payload {
  bytes: Uint8Array;
  contentType: string;
}

/** A task to enqueue: a type, a payload, optional metadata. */
export interface NewTaskSpec {
  type: string;
  payload: Payload;
  metadata?: Record<string, string>;
}

export function newTask(type: string, payload: Payload = bytes(new Uint8Array()), metadata?: Record<string, string>): NewTaskSpec {
  return metadata ? { type, payload, metadata } : { type, payload };
}

/** A JSON payload. */
export function json(value: unknown): Payload {
  return { bytes: new TextEncoder().encode(JSON.stringify(value)), contentType: "application/json" };
}

/** Raw bytes. */
export function bytes(data: Uint8Array, contentType = "application/octet-stream"): Payload {
  return { bytes: data, contentType };
}

export interface EnqueueOptions {
  /** Default "default". */
  queue?: string;
  /** 1..9, 9 highest; default 4. */
  priority?: number;
  /** Retries after the first attempt; default from the server (25). */
  maxRetry?: number;
  /** Per-attempt timeout. */
  timeout?: Duration;
  /** Absolute deadline of the whole task. */
  deadline?: Date;
  processAt?: Date;
  processIn?: Duration;
  /** Rejects a duplicate among unfinished tasks (ALREADY_EXISTS). */
  uniqueKey?: string;
  uniqueTtl?: Duration;
  /** Your own id: enqueueing it again returns the existing task. */
  taskId?: string;
  /** How long the completed task is kept. */
  retention?: Duration;
  expiresIn?: Duration;
  expiresAt?: Date;
  /** Tasks sharing a key share the queue's per-key concurrency limit. */
  concurrencyKey?: string;
  /** Aggregation group. */
  group?: string;
  /** Retry backoff override. */
  backoff?: { base: Duration; max?: Duration };
}

const ms = (d: Duration | undefined): bigint => (d === undefined ? 0n : BigInt(typeof d === "number" ? Math.round(d) : parseDurationMs(d)));
const at = (d: Date | undefined): bigint => (d === undefined ? 0n : BigInt(d.getTime()));

export function toSpec(task: NewTaskSpec, o: EnqueueOptions = {}): TaskSpec {
  return create(TaskSpecSchema, {
    type: task.type, payload: task.payload.bytes, contentType: task.payload.contentType, metadata: task.metadata ?? {},
    queue: o.queue ?? "", ...(o.priority !== undefined ? { priority: o.priority } : {}),
    ...(o.maxRetry !== undefined ? { maxRetry: o.maxRetry } : {}),
    timeoutMs: ms(o.timeout), deadlineAtMs: at(o.deadline), processAtMs: at(o.processAt), processInMs: ms(o.processIn),
    uniqueKey: o.uniqueKey ?? "", uniqueTtlMs: ms(o.uniqueTtl), taskId: o.taskId ?? "",
    ...(o.retention !== undefined ? { retentionMs: ms(o.retention) } : {}),
    expiresInMs: ms(o.expiresIn), expiresAtMs: at(o.expiresAt), concurrencyKey: o.concurrencyKey ?? "",
    group: o.group ?? "", backoffBaseMs: ms(o.backoff?.base), backoffMaxMs: ms(o.backoff?.max),
  });
}

/** A stored task as the SDK shows it. Instants are Dates, or undefined when unset. */
export interface TaskView {
  id: string;
  queue: string;
  type: string;
  payload: Uint8Array;
  contentType: string;
  metadata: Record<string, string>;
  state: TaskState;
  priority: number;
  maxRetry: number;
  retried: number;
  createdAt: Date | undefined;
  readyAt: Date | undefined;
  deadline: Date | undefined;
  expiresAt: Date | undefined;
  finishedAt: Date | undefined;
  lastFailedAt: Date | undefined;
  uniqueKey: string;
  concurrencyKey: string;
  group: string;
  lastError: string;
  result: Uint8Array;
  cancelReason: string;
  leaseId: string;
  /** The payload parsed as JSON. */
  json<T = unknown>(): T;
}

/** A state this SDK does not know (a newer server's): shown as "unknown", never guessed. */
export const stateName = (s: WireState): TaskState => stateFromWire(s) ?? "unknown";

const date = (v: bigint): Date | undefined => (v === 0n ? undefined : new Date(Number(v)));

export function toTaskView(t: Task): TaskView {
  return {
    id: t.id, queue: t.queue, type: t.type, payload: t.payload, contentType: t.contentType, metadata: t.metadata,
    state: stateName(t.state), priority: t.priority, maxRetry: t.maxRetry, retried: t.retried,
    createdAt: date(t.createdAtMs), readyAt: date(t.readyAtMs), deadline: date(t.deadlineAtMs),
    expiresAt: date(t.expiresAtMs), finishedAt: date(t.finishedAtMs), lastFailedAt: date(t.lastFailedAtMs),
    uniqueKey: t.uniqueKey, concurrencyKey: t.concurrencyKey, group: t.group, lastError: t.lastError,
    result: t.result, cancelReason: t.cancelReason, leaseId: t.leaseId,
    json<T>() {
      return JSON.parse(new TextDecoder().decode(t.payload)) as T;
    },
  };
}
