/**
 * Turns a wire TaskSpec into a domain NewTask: every rule a producer can break is
 * checked here, with an INVALID_ARGUMENT that names the field, before anything is
 * stored. Relative times become absolute against one `nowMs`.
 */
import { invalidField, tooLong } from "../base/errors.js";
import {
  CONTENT_TYPE_MAX_CHARS, DURATION_MAX_MS, INSTANT_MAX_MS, KEY_MAX_CHARS, METADATA_ENTRIES_MAX, METADATA_KEY_MAX_BYTES,
  METADATA_MAX_BYTES, METADATA_VALUE_MAX_BYTES, PAGE_TOKEN_MAX_CHARS, PAYLOAD_MAX_BYTES, QUEUE_NAME_MAX_CHARS, RATE_MAX_PER_SEC, RATE_MIN_PER_SEC,
  TASK_ID_MAX_CHARS, formatBytes, quote, utf8Bytes,
} from "../base/limits.js";
import type { NewTask } from "../grains/queue/task.js";
import type { TaskSpec } from "../gen/conveyor/v1/task_pb.js";

export { BATCH_MAX } from "../base/limits.js";

const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;
/** The queue of a task spec (or a schedule) that names none. */
export const DEFAULT_QUEUE = "default";
const TASK_ID = /^[A-Za-z0-9._:@/-]+$/;

export interface TaskDefaults {
  maxRetry: number;
  retentionMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

/** Refuses a string longer than `maxChars` (checked before anything else looks at it). */
export function checkLength(value: string, field: string, maxChars: number): string {
  if (value.length > maxChars) throw tooLong(field, value, maxChars);
  return value;
}

/** Validates a queue name; `field` names it in the error. */
export function checkQueueName(name: string, field: string): string {
  checkLength(name, field, QUEUE_NAME_MAX_CHARS);
  if (!QUEUE_NAME.test(name)) {
    throw invalidField(field, `invalid queue name ${quote(name)}: use 1-${QUEUE_NAME_MAX_CHARS} letters, digits, '.', '_', ':' or '-', starting with a letter or digit`);
  }
  return name;
}

/** A task id to look up (any characters; ids are compared, never parsed). */
export function checkTaskId(id: string, field: string): string {
  if (id === "") throw invalidField(field, "must not be empty");
  return checkLength(id, field, TASK_ID_MAX_CHARS);
}

/** A ListTasks page token: a row number from a previous page. */
export function checkPageToken(token: string, field: string): string {
  if (token === "") return token;
  if (token.length > PAGE_TOKEN_MAX_CHARS || !/^\d+$/.test(token) || !Number.isSafeInteger(Number(token))) {
    throw invalidField(field, "not a token from a previous page");
  }
  return token;
}

const YEARS_100 = "100 years";
const INSTANT_MAX_TEXT = new Date(INSTANT_MAX_MS).toISOString();

/** A duration in ms: 0..DURATION_MAX_MS. */
export function checkDurationMs(v: bigint | number, field: string): number {
  if (v < 0) throw invalidField(field, `must not be negative, got ${v}`);
  if (v > DURATION_MAX_MS) throw invalidField(field, `must be at most ${DURATION_MAX_MS} ms (${YEARS_100}), got ${v}`);
  return Number(v);
}

/** An instant in ms since the epoch: 0 (unset) or up to INSTANT_MAX_MS. */
export function checkInstantMs(v: bigint, field: string): number {
  if (v < 0n) throw invalidField(field, `must not be negative, got ${v}`);
  if (v > BigInt(INSTANT_MAX_MS)) throw invalidField(field, `must be at most ${INSTANT_MAX_MS} (${INSTANT_MAX_TEXT}), got ${v}`);
  return Number(v);
}

/** A rate limit in tasks per second: RATE_MIN_PER_SEC..RATE_MAX_PER_SEC. */
export function checkRate(ratePerSec: number, field: string): number {
  if (Number.isNaN(ratePerSec) || ratePerSec <= 0) throw invalidField(field, `must be greater than 0, got ${ratePerSec}`);
  if (ratePerSec < RATE_MIN_PER_SEC) throw invalidField(field, `must be at least ${RATE_MIN_PER_SEC} (one task per ${Math.round(1 / RATE_MIN_PER_SEC / 86_400)} days), got ${ratePerSec}`);
  if (ratePerSec > RATE_MAX_PER_SEC) throw invalidField(field, `must be at most ${RATE_MAX_PER_SEC} (for more, set no limit), got ${ratePerSec}`);
  return ratePerSec;
}

function checkMetadata(metadata: Record<string, string>, field: string): void {
  const entries = Object.entries(metadata);
  if (entries.length > METADATA_ENTRIES_MAX) throw invalidField(field, `has ${entries.length} entries; the limit is ${METADATA_ENTRIES_MAX}`);
  let total = 0;
  for (const [key, value] of entries) {
    const keyBytes = utf8Bytes(key);
    const valueBytes = utf8Bytes(value);
    if (keyBytes > METADATA_KEY_MAX_BYTES) {
      throw invalidField(field, `key ${quote(key)} is ${keyBytes} bytes; the limit is ${METADATA_KEY_MAX_BYTES}`);
    }
    if (valueBytes > METADATA_VALUE_MAX_BYTES) {
      throw invalidField(field, `the value of ${quote(key)} is ${valueBytes} bytes; the limit is ${METADATA_VALUE_MAX_BYTES}`);
    }
    total += keyBytes + valueBytes;
  }
  if (total > METADATA_MAX_BYTES) {
    throw invalidField(field, `is ${total} bytes (keys and values); the limit is ${METADATA_MAX_BYTES} (${formatBytes(METADATA_MAX_BYTES)})`);
  }
}

/**
 * Every bound is checked before anything derived from the value is computed, so an
 * out-of-range value is refused here instead of overflowing later.
 */
export function validateSpec(spec: TaskSpec | undefined, prefix: string, d: TaskDefaults, nowMs: number, newId: (queue: string) => string): NewTask {
  if (!spec) throw invalidField(prefix, "missing");
  const f = (name: string) => `${prefix}.${name}`;
  checkLength(spec.type, f("type"), KEY_MAX_CHARS);
  if (spec.type.trim() === "") throw invalidField(f("type"), "must not be empty");
  const queue = checkQueueName(spec.queue === "" ? DEFAULT_QUEUE : spec.queue, f("queue"));
  checkLength(spec.taskId, f("task_id"), TASK_ID_MAX_CHARS);
  if (spec.taskId !== "" && !TASK_ID.test(spec.taskId)) {
    throw invalidField(f("task_id"), `use 1-${TASK_ID_MAX_CHARS} letters, digits or . _ : @ / -`);
  }
  checkLength(spec.uniqueKey, f("unique_key"), KEY_MAX_CHARS);
  checkLength(spec.concurrencyKey, f("concurrency_key"), KEY_MAX_CHARS);
  checkLength(spec.group, f("group"), KEY_MAX_CHARS);
  checkLength(spec.contentType, f("content_type"), CONTENT_TYPE_MAX_CHARS);
  if (spec.payload.byteLength > PAYLOAD_MAX_BYTES) {
    throw invalidField(f("payload"), `is ${spec.payload.byteLength} bytes; the limit is ${PAYLOAD_MAX_BYTES} (${formatBytes(PAYLOAD_MAX_BYTES)})`);
  }
  checkMetadata(spec.metadata, f("metadata"));
  if (spec.priority !== undefined && (spec.priority < 1 || spec.priority > 9)) {
    throw invalidField(f("priority"), `must be 1..9 (9 highest), got ${spec.priority}`);
  }
  if (spec.maxRetry !== undefined && spec.maxRetry < 0) throw invalidField(f("max_retry"), `must not be negative, got ${spec.maxRetry}`);
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
  if (spec.uniqueTtlMs !== 0n && spec.uniqueKey === "") throw invalidField(f("unique_ttl_ms"), "needs unique_key");

  const processInMs = checkDurationMs(spec.processInMs, f("process_in_ms"));
  const processAtMs = spec.processAtMs !== 0n ? checkInstantMs(spec.processAtMs, f("process_at_ms")) : processInMs > 0 ? nowMs + processInMs : 0;
  const expiresInMs = checkDurationMs(spec.expiresInMs, f("expires_in_ms"));
  const expiresAtMs = spec.expiresAtMs !== 0n ? checkInstantMs(spec.expiresAtMs, f("expires_at_ms")) : expiresInMs > 0 ? nowMs + expiresInMs : 0;
  if (expiresAtMs !== 0 && expiresAtMs <= nowMs) throw invalidField(f("expires_at_ms"), "is in the past");
  const deadlineAtMs = checkInstantMs(spec.deadlineAtMs, f("deadline_at_ms"));
  if (deadlineAtMs !== 0 && deadlineAtMs <= nowMs) throw invalidField(f("deadline_at_ms"), "is in the past");
  const backoffBaseMs = checkDurationMs(spec.backoffBaseMs, f("backoff_base_ms")) || d.backoffBaseMs;
  const backoffMaxMs = checkDurationMs(spec.backoffMaxMs, f("backoff_max_ms")) || Math.max(d.backoffMaxMs, backoffBaseMs);
  if (backoffBaseMs > backoffMaxMs) throw invalidField(f("backoff_base_ms"), "is larger than backoff_max_ms");

  return {
    id: spec.taskId || newId(queue),
    idChosen: spec.taskId !== "",
    queue,
    type: spec.type,
    payload: spec.payload,
    contentType: spec.contentType,
    metadata: { ...spec.metadata },
    priority: spec.priority ?? 4,
    maxRetry: spec.maxRetry ?? d.maxRetry,
    timeoutMs: checkDurationMs(spec.timeoutMs, f("timeout_ms")),
    deadlineAtMs,
    processAtMs,
    uniqueKey: spec.uniqueKey,
    uniqueTtlMs: checkDurationMs(spec.uniqueTtlMs, f("unique_ttl_ms")),
    retentionMs: spec.retentionMs !== undefined ? checkDurationMs(spec.retentionMs, f("retention_ms")) : d.retentionMs,
    expiresAtMs,
    concurrencyKey: spec.concurrencyKey,
    group: spec.group,
    backoffBaseMs,
    backoffMaxMs,
    rules: [],
    ruleError: "",
  };
}
