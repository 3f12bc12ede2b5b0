import type { TaskRecord, TaskState } from "../grains/queue/task.js";
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

/** A zero-copy Buffer view of bytes (better-sqlite3 binds Buffers as BLOBs). */
export function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
