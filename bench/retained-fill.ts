/**
 * Fills a data dir with retained history fast: finished tasks written straight into
 * SQLite (a prepared INSERT in big transactions), not through gRPC, so that millions of
 * them take a minute rather than the hour the node would need to run them. Each row has
 * the shape a completed task has on a real node: the benchmark's ~110-byte JSON payload,
 * a small result, a finished attempt and its attempt-history row.
 */
import { randomUUID } from "node:crypto";
import { statSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE, openDataDir } from "../src/storage/data-dir.js";
import { payloadOf } from "./payload.js";
import { TASK_TYPE } from "./protocol.js";

/** Rows per transaction: large enough that the commit is amortised, small enough to keep the WAL modest. */
const ROWS_PER_TRANSACTION = 50_000;

export interface FillResult {
  rows: number;
  seconds: number;
  /** conveyor.db after a checkpoint (the WAL folded in), bytes. */
  dbBytes: number;
}

/**
 * Writes `rows` completed tasks of `queue` into the data dir (created and migrated if
 * new), each due for the janitor at `purgeAtMs`.
 */
export function fillRetained(dir: string, queue: string, rows: number, purgeAtMs: number, onProgress: (done: number) => void): FillResult {
  const started = Date.now();
  const dataDir = openDataDir({ dir, synchronous: "normal" });
  try {
    const db = dataDir.db.sqlite;
    db.prepare("INSERT OR IGNORE INTO queues (name, paused, created_at) VALUES (?, 0, ?)").run(queue, started);
    const insert = db.prepare(`INSERT INTO tasks (id, queue, type, payload, content_type, metadata, state, priority, seq,
      max_retry, retried, created_at, ready_at, timeout_ms, deadline_at, expires_at, unique_key, unique_until,
      concurrency_key, grp, backoff_base_ms, backoff_max_ms, retention_ms, finished_at, result, purge_at,
      attempt_started_at, attempt_worker, attempt_number)
      VALUES (?, ?, ?, ?, 'application/json', NULL, 'completed', 4, ?, 25, 0, ?, ?, 0, 0, 0, '', 0, '', '', 0, 0,
      86400000, ?, ?, ?, ?, 'bench-worker-1', 1)`);
    const attempt = db.prepare(`INSERT INTO attempts (task_id, number, started_at, ended_at, worker_id, outcome, error)
      VALUES (?, 1, ?, ?, 'bench-worker-1', 'succeeded', '')`);
    const result = Buffer.from('{"ok":true}');
    const batch = db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) {
        const id = randomUUID();
        const createdAt = started - (rows - i);
        const payload = Buffer.from(JSON.stringify(payloadOf(i, createdAt)));
        insert.run(id, queue, TASK_TYPE, payload, i + 1, createdAt, createdAt, createdAt + 2, result, purgeAtMs, createdAt + 1);
        attempt.run(id, createdAt + 1, createdAt + 2);
      }
    });
    for (let from = 0; from < rows; from += ROWS_PER_TRANSACTION) {
      batch(from, Math.min(rows, from + ROWS_PER_TRANSACTION));
      onProgress(Math.min(rows, from + ROWS_PER_TRANSACTION));
    }
    db.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    dataDir.close();
  }
  return { rows, seconds: (Date.now() - started) / 1000, dbBytes: statSync(join(dir, DB_FILE)).size };
}
