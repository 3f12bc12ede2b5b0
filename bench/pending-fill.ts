/**
 * Fills a data dir with pending tasks fast: copies of one task a real node enqueued (the
 * template row, read from the same file), written straight into SQLite in big
 * transactions, so that a million of them take seconds rather than the minutes gRPC
 * would. Each copy gets a fresh id in the server's shape, the next dispatch rank, its
 * own ~110-byte payload and, when asked, another queue or concurrency key; every other
 * column is the template's, so the rows are exactly what the node itself writes.
 */
import { randomUUID } from "node:crypto";
import { openDataDir } from "../src/storage/data-dir.js";
import { payloadOf } from "./payload.js";

/** Rows per transaction: large enough that the commit is amortised, small enough to keep the WAL modest. */
const ROWS_PER_TRANSACTION = 50_000;

export interface PendingFill {
  /** The queue whose newest task is copied. */
  templateQueue: string;
  rows: number;
  /** The queue of the i-th copy (default: the template's). */
  queueOf?: (i: number) => string;
  /** The concurrency key of the i-th copy (default: the template's). */
  keyOf?: (i: number) => string;
}

/** Writes `fill.rows` pending copies of the template task; returns the seconds it took. */
export function fillPending(dir: string, fill: PendingFill, onProgress: (done: number) => void): number {
  const started = Date.now();
  const dataDir = openDataDir({ dir, synchronous: "normal" });
  try {
    const db = dataDir.db.sqlite;
    const template = db.prepare("SELECT * FROM tasks WHERE queue = ? AND state = 'pending' ORDER BY rowid DESC LIMIT 1").get(fill.templateQueue) as
      Record<string, unknown> | undefined;
    if (!template) throw new Error(`no pending task in ${fill.templateQueue} to copy`);
    const maxSeq = (db.prepare("SELECT MAX(seq) AS s FROM tasks").get() as { s: number }).s;
    const columns = Object.keys(template);
    const insert = db.prepare(`INSERT INTO tasks (${columns.join(", ")}) VALUES (${columns.map((c) => `@${c}`).join(", ")})`);
    const queues = new Set<string>();
    const ensureQueue = db.prepare("INSERT OR IGNORE INTO queues (name, paused, created_at) VALUES (?, 0, ?)");
    const batch = db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) {
        const createdAt = started - (fill.rows - i);
        const queue = fill.queueOf?.(i) ?? (template.queue as string);
        if (!queues.has(queue)) {
          ensureQueue.run(queue, started);
          queues.add(queue);
        }
        insert.run({
          ...template,
          id: `0000${randomUUID().slice(4)}`,
          queue,
          seq: maxSeq + i + 1,
          created_at: createdAt,
          ready_at: createdAt,
          payload: Buffer.from(JSON.stringify(payloadOf(i, createdAt))),
          concurrency_key: fill.keyOf?.(i) ?? template.concurrency_key,
        });
      }
    });
    for (let from = 0; from < fill.rows; from += ROWS_PER_TRANSACTION) {
      batch(from, Math.min(fill.rows, from + ROWS_PER_TRANSACTION));
      onProgress(Math.min(fill.rows, from + ROWS_PER_TRANSACTION));
    }
    db.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    dataDir.close();
  }
  return (Date.now() - started) / 1000;
}
