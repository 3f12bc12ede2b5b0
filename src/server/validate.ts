/**
 * Turns a wire TaskSpec into a domain NewTask: every rule a producer can break is
 * checked here, with an INVALID_ARGUMENT that names the field, before anything is
 * stored. Relative times become absolute against one `nowMs`.
 */
import { invalidField } from "../base/errors.js";
import type { NewTask } from "../grains/queue/task.js";
import type { TaskSpec } from "../gen/conveyor/v1/task_pb.js";

export const PAYLOAD_MAX_BYTES = 1024 * 1024;
export const BATCH_MAX = 1000;
const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const TASK_ID = /^[A-Za-z0-9._:@/-]{1,128}$/;

export interface TaskDefaults {
  maxRetry: number;
  retentionMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

/** Validates a queue name; `field` names it in the error. */
export function checkQueueName(name: string, field: string): string {
  if (!QUEUE_NAME.test(name)) {
    throw invalidField(field, `invalid queue name ${JSON.stringify(name)}: use 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit`);
  }
  return name;
}

const num = (v: bigint) => Number(v);

function nonNegative(v: bigint, field: string): number {
  if (v < 0n) throw invalidField(field, `must not be negative, got ${v}`);
  return num(v);
}

export function validateSpec(spec: TaskSpec | undefined, prefix: string, d: TaskDefaults, nowMs: number, newId: () => string): NewTask {
  if (!spec) throw invalidField(prefix, "missing");
  const f = (name: string) => `${prefix}.${name}`;
  if (spec.type.trim() === "") throw invalidField(f("type"), "must not be empty");
  if (spec.type.length > 256) throw invalidField(f("type"), "longer than 256 characters");
  const queue = checkQueueName(spec.queue === "" ? "default" : spec.queue, f("queue"));
  if (spec.priority !== undefined && (spec.priority < 1 || spec.priority > 9)) {
    throw invalidField(f("priority"), `must be 1..9 (9 highest), got ${spec.priority}`);
  }
  if (spec.maxRetry !== undefined && spec.maxRetry < 0) throw invalidField(f("max_retry"), `must not be negative, got ${spec.maxRetry}`);
  if (spec.payload.byteLength > PAYLOAD_MAX_BYTES) {
    throw invalidField(f("payload"), `is ${spec.payload.byteLength} bytes; the limit is ${PAYLOAD_MAX_BYTES} (1 MiB)`);
  }
  if (spec.processAtMs !== 0n && spec.processInMs !== 0n) {
    throw invalidField(f("process_at_ms"), "process_at_ms and process_in_ms are mutually exclusive");
  }
  if (spec.expiresAtMs !== 0n && spec.expiresInMs !== 0n) {
    throw invalidField(f("expires_at_ms"), "expires_at_ms and expires_in_ms are mutually exclusive");
  }
  if (spec.group !== "" && spec.concurrencyKey !== "") {
    throw invalidField(f("group"), "group and concurrency_key are mutually exclusive");
  }
  if (spec.group !== "" && (spec.processAtMs !== 0n || spec.processInMs !== 0n)) {
    throw invalidField(f("group"), "group and process_at_ms/process_in_ms are mutually exclusive");
  }
  if (spec.group.length > 256) throw invalidField(f("group"), "longer than 256 characters");
  if (spec.uniqueTtlMs !== 0n && spec.uniqueKey === "") throw invalidField(f("unique_ttl_ms"), "needs unique_key");
  if (spec.taskId !== "" && !TASK_ID.test(spec.taskId)) {
    throw invalidField(f("task_id"), "use 1-128 letters, digits or . _ : @ / -");
  }
  if (spec.concurrencyKey.length > 256) throw invalidField(f("concurrency_key"), "longer than 256 characters");
  if (spec.uniqueKey.length > 256) throw invalidField(f("unique_key"), "longer than 256 characters");
  if (Object.keys(spec.metadata).length > 64) throw invalidField(f("metadata"), "more than 64 entries");

  const processInMs = nonNegative(spec.processInMs, f("process_in_ms"));
  const processAtMs = spec.processAtMs !== 0n ? num(spec.processAtMs) : processInMs > 0 ? nowMs + processInMs : 0;
  const expiresInMs = nonNegative(spec.expiresInMs, f("expires_in_ms"));
  const expiresAtMs = spec.expiresAtMs !== 0n ? num(spec.expiresAtMs) : expiresInMs > 0 ? nowMs + expiresInMs : 0;
  if (expiresAtMs !== 0 && expiresAtMs <= nowMs) throw invalidField(f("expires_at_ms"), "is in the past");
  const deadlineAtMs = nonNegative(spec.deadlineAtMs, f("deadline_at_ms"));
  if (deadlineAtMs !== 0 && deadlineAtMs <= nowMs) throw invalidField(f("deadline_at_ms"), "is in the past");
  const backoffBaseMs = nonNegative(spec.backoffBaseMs, f("backoff_base_ms")) || d.backoffBaseMs;
  const backoffMaxMs = nonNegative(spec.backoffMaxMs, f("backoff_max_ms")) || Math.max(d.backoffMaxMs, backoffBaseMs);
  if (backoffBaseMs > backoffMaxMs) throw invalidField(f("backoff_base_ms"), "is larger than backoff_max_ms");

  return {
    id: spec.taskId || newId(),
    idChosen: spec.taskId !== "",
    queue,
    type: spec.type,
    payload: spec.payload,
    contentType: spec.contentType,
    metadata: { ...spec.metadata },
    priority: spec.priority ?? 4,
    maxRetry: spec.maxRetry ?? d.maxRetry,
    timeoutMs: nonNegative(spec.timeoutMs, f("timeout_ms")),
    deadlineAtMs,
    processAtMs,
    uniqueKey: spec.uniqueKey,
    uniqueTtlMs: nonNegative(spec.uniqueTtlMs, f("unique_ttl_ms")),
    retentionMs: spec.retentionMs !== undefined ? nonNegative(spec.retentionMs, f("retention_ms")) : d.retentionMs,
    expiresAtMs,
    concurrencyKey: spec.concurrencyKey,
    group: spec.group,
    backoffBaseMs,
    backoffMaxMs,
    rules: [],
    ruleError: "",
  };
}
