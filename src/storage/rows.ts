import type { TaskIndexEntry, TaskRecord, TaskState } from "../grains/queue/task.js";
import type { TaskRule } from "../grains/queue/rules.js";

/** A `tasks` row as better-sqlite3 returns it. */
export interface TaskRow {
  id: string; queue: string; type: string; payload: Buffer; content_type: string; metadata: string | null;
  state: TaskState; priority: number; seq: number; max_retry: number; retried: number; created_at: number;
  ready_at: number; timeout_ms: number; deadline_at: number; expires_at: number; unique_key: string;
  unique_until: number; concurrency_key: string; grp: string; backoff_base_ms: number; backoff_max_ms: number;
  retention_ms: number; last_error: string; last_failed_at: number; finished_at: number; result: Buffer | null;
  cancel_reason: string; lease_id: string; lease_expires_at: number; purge_at: number; rules: string; attempt_number: number;
}

export function rowToRecord(r: TaskRow): TaskRecord {
  return {
    id: r.id, queue: r.queue, type: r.type, payload: r.payload, contentType: r.content_type,
    metadata: r.metadata ? (JSON.parse(r.metadata) as Record<string, string>) : {},
    state: r.state, priority: r.priority, seq: r.seq, maxRetry: r.max_retry, retried: r.retried,
    createdAtMs: r.created_at, readyAtMs: r.ready_at, timeoutMs: r.timeout_ms, deadlineAtMs: r.deadline_at,
    expiresAtMs: r.expires_at, uniqueKey: r.unique_key, uniqueUntilMs: r.unique_until,
    concurrencyKey: r.concurrency_key, group: r.grp, backoffBaseMs: r.backoff_base_ms,
    backoffMaxMs: r.backoff_max_ms, retentionMs: r.retention_ms, lastError: r.last_error,
    lastFailedAtMs: r.last_failed_at, finishedAtMs: r.finished_at, result: r.result ?? new Uint8Array(),
    cancelReason: r.cancel_reason, leaseId: r.lease_id, leaseExpiresAtMs: r.lease_expires_at,
    rules: JSON.parse(r.rules) as TaskRule[], attemptNumber: r.attempt_number,
  };
}

/**
 * The columns of a task a delivery needs that the grain's index entry does not hold,
 * as activation's RETURNING reads them. Every other column of the row was written from
 * the entry (at insert, or by the transitions since), so the entry holds its value.
 */
export const DELIVERY_COLUMNS = "payload, content_type, metadata, created_at, last_error, last_failed_at, finished_at, result, cancel_reason, retention_ms";

export interface DeliveryRow {
  payload: Buffer; content_type: string; metadata: string | null; created_at: number; last_error: string;
  last_failed_at: number; finished_at: number; result: Buffer | null; cancel_reason: string; retention_ms: number;
}

/**
 * The record of a task just activated, from its entry (after activation) and the columns
 * only the row holds: what `rowToRecord` of the whole row gives, for a third of the
 * cost (RETURNING * copies ~35 columns into an ephemeral table, then into a JS object).
 */
export function activatedRecord(queue: string, e: TaskIndexEntry, r: DeliveryRow): TaskRecord {
  return {
    id: e.id, queue, type: e.type, payload: r.payload, contentType: r.content_type,
    metadata: r.metadata ? (JSON.parse(r.metadata) as Record<string, string>) : {},
    state: e.state, priority: e.priority, seq: e.seq, maxRetry: e.maxRetry, retried: e.retried,
    createdAtMs: r.created_at, readyAtMs: e.readyAtMs, timeoutMs: e.timeoutMs, deadlineAtMs: e.deadlineAtMs,
    expiresAtMs: e.expiresAtMs, uniqueKey: e.uniqueKey, uniqueUntilMs: e.uniqueUntilMs,
    concurrencyKey: e.concurrencyKey, group: e.group, backoffBaseMs: e.backoffBaseMs,
    backoffMaxMs: e.backoffMaxMs, retentionMs: r.retention_ms, lastError: r.last_error,
    lastFailedAtMs: r.last_failed_at, finishedAtMs: r.finished_at, result: r.result ?? new Uint8Array(),
    cancelReason: r.cancel_reason, leaseId: e.leaseId, leaseExpiresAtMs: e.leaseExpiresAtMs,
    rules: e.rules, attemptNumber: e.attemptNumber,
  };
}

/** A zero-copy Buffer view of bytes (better-sqlite3 binds Buffers as BLOBs). */
export function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
