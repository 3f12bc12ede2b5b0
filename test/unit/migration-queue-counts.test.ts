/**
 * Migration 009 on a data dir made by a node at schema 008 (before queue_counts): the
 * counts are backfilled from the rows already stored, and from then on the triggers keep
 * them. The 008 file is built the way an 008 node built it: migrations 1..8 applied and
 * recorded, tasks written as rows.
 */
import BetterSqlite3 from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MIGRATIONS } from "../../src/storage/migrations/index.js";
import { AdminQueries } from "../../src/storage/admin-queries.js";
import { DB_FILE, openDataDir } from "../../src/storage/data-dir.js";

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-migrate-009-"));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Tasks per (queue, state) written into the 008 file. */
const STORED: Record<string, Partial<Record<string, number>>> = {
  emails: { pending: 3, active: 1, completed: 40, archived: 2 },
  reports: { scheduled: 2, retry: 1, cancelled: 5 },
  drained: { completed: 7 },
};

function createSchema008(path: string): void {
  const db = new BetterSqlite3(path);
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT");
  for (const m of MIGRATIONS.filter((m) => m.version <= 8)) {
    db.exec(m.sql);
    db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, 1_700_000_000_000);
  }
  const insert = db.prepare(`INSERT INTO tasks (id, queue, type, payload, content_type, state, priority, seq, max_retry, retried,
    created_at, ready_at, timeout_ms, deadline_at, expires_at, unique_key, unique_until, concurrency_key, grp, backoff_base_ms,
    backoff_max_ms, retention_ms, purge_at) VALUES (?, ?, 't', x'00', 'application/octet-stream', ?, 4, ?, 3, 0, 1, 1, 0, 0, 0, '', 0, '', '', 1000, 60000, 60000, ?)`);
  let seq = 0;
  for (const [queue, states] of Object.entries(STORED)) {
    db.prepare("INSERT INTO queues (name, paused, created_at) VALUES (?, 0, 1)").run(queue);
    for (const [state, n] of Object.entries(states)) {
      for (let i = 0; i < n!; i++) insert.run(`${queue}-${state}-${i}`, queue, state, ++seq, ["completed", "archived", "cancelled"].includes(state) ? 100 : 0);
    }
  }
  db.close();
}

describe("migration 009 (queue_counts)", () => {
  it("backfills the counts of a schema-008 data dir, and the triggers keep them from then on", () => {
    createSchema008(join(dir, DB_FILE));
    const dataDir = openDataDir({ dir, synchronous: "normal" });
    try {
      expect(dataDir.opened).toBe("adopted");
      expect(dataDir.db.schema.version).toBe(MIGRATIONS.length);
      const queries = new AdminQueries(dataDir.db);
      const listed = Object.fromEntries(queries.listQueues().map((q) => [q.name,
        Object.fromEntries(Object.entries(q.counts).filter(([, n]) => n > 0))]));
      expect(listed).toEqual(STORED);
      expect(queries.queuesWithUnfinishedTasks().sort()).toEqual(["emails", "reports"]);

      // Later writes move the counts: a state change, a purge, an insert.
      const sqlite = dataDir.db.sqlite;
      dataDir.db.write(() => {
        sqlite.prepare("UPDATE tasks SET state = 'active' WHERE id = 'emails-pending-0'").run();
        expect(queries.purgeFinished(100, 1_000)).toBe(54);
        sqlite.prepare(`INSERT INTO tasks (id, queue, type, payload, content_type, state, priority, seq, max_retry, retried,
          created_at, ready_at, timeout_ms, deadline_at, expires_at, unique_key, unique_until, concurrency_key, grp, backoff_base_ms,
          backoff_max_ms, retention_ms) VALUES ('new', 'fresh', 't', x'00', 'x', 'pending', 4, 1, 3, 0, 1, 1, 0, 0, 0, '', 0, '', '', 1, 1, 1)`).run();
      });
      const truth = sqlite.prepare("SELECT queue, state, COUNT(*) AS n FROM tasks GROUP BY queue, state ORDER BY queue, state").all();
      expect(sqlite.prepare("SELECT queue, state, n FROM queue_counts WHERE n > 0 ORDER BY queue, state").all()).toEqual(truth);
      expect(queries.queueSummary("emails").counts).toMatchObject({ pending: 2, active: 2, completed: 0, archived: 0 });
    } finally {
      dataDir.close();
    }
  });
});
