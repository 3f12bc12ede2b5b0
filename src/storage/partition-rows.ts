/**
 * A partition's rows, as a handoff moves them: every row of every table that belongs to
 * the queues of one partition (their tasks and attempts, settings, group configs,
 * schedules and per-queue slot limits), copied into a SQLite file of their own, loaded
 * on the new owner, then dropped on the old one.
 *
 * The snapshot is a serialized SQLite database (better-sqlite3's `serialize`), not a
 * format of ours: its tables have this node's schema, so loading it is one INSERT per row
 * through the same columns, and an operator can open a snapshot with the sqlite3 shell.
 * Node-wide rows (task-type rules, node-wide slot limits) are not a partition's and stay.
 */
import BetterSqlite3 from "better-sqlite3";
import type { Database } from "./database.js";

/** A table and how its rows belong to a set of queues (`$queues`: the JSON array of names). */
interface PartitionTable {
  name: string;
  where: string;
}

const IN_QUEUES = "(SELECT value FROM json_each($queues))";

/** Every table with rows of a queue. Order matters for loading: none (no foreign keys), but tasks first reads best. */
const TABLES: readonly PartitionTable[] = [
  { name: "tasks", where: `queue IN ${IN_QUEUES}` },
  { name: "attempts", where: `task_id IN (SELECT id FROM tasks WHERE queue IN ${IN_QUEUES})` },
  { name: "queues", where: `name IN ${IN_QUEUES}` },
  { name: "group_configs", where: `queue IN ${IN_QUEUES}` },
  { name: "schedules", where: `queue IN ${IN_QUEUES}` },
  { name: "slot_limits", where: `scope IN ${IN_QUEUES}` },
];

/** Per-state counts (migration 009): kept by triggers on tasks, so never copied; dropped with the queue's rows. */
const COUNTS: PartitionTable = { name: "queue_counts", where: `queue IN ${IN_QUEUES}` };

export interface SnapshotInfo {
  bytes: Buffer;
  queues: string[];
  tasks: number;
}

export class PartitionRows {
  constructor(private readonly db: Database) {}

  /**
   * Every queue with a row of any kind on this node. Its tasks' queues come from the
   * per-state counts (one row per queue and state), not from a scan of the tasks.
   */
  queueNames(): string[] {
    return this.db.sqlite.prepare(`SELECT queue FROM queue_counts WHERE n > 0 UNION SELECT name FROM queues UNION SELECT queue FROM schedules
      UNION SELECT queue FROM group_configs`).pluck().all() as string[];
  }

  /**
   * The rows of `queues` as a SQLite file. Reads through the node's connection, so it
   * sees what the node wrote; callers stop writes to these queues and await the commit
   * first, so what it copies is exactly what was acknowledged.
   */
  snapshot(queues: readonly string[]): SnapshotInfo {
    return this.snapshotVia(this.db.sqlite, queues);
  }

  /**
   * The rows of `queues` as committed now (a read transaction on the database's read-only
   * connection: the open group-commit transaction's writes are not in it). Synchronous, so
   * the caller can note in the same tick where the log stands (TurnJournal.seal).
   */
  snapshotCommitted(queues: readonly string[]): SnapshotInfo {
    const reader = this.db.committedReader();
    return reader.transaction(() => this.snapshotVia(reader, queues))();
  }

  private snapshotVia(source: BetterSqlite3.Database, queues: readonly string[]): SnapshotInfo {
    const snap = new BetterSqlite3(":memory:");
    try {
      const list = JSON.stringify(queues);
      let tasks = 0;
      for (const table of TABLES) {
        const ddl = source.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").pluck().get(table.name) as string | undefined;
        if (!ddl) continue;
        snap.exec(ddl);
        const rows = source.prepare(`SELECT * FROM ${table.name} WHERE ${table.where}`).all({ queues: list }) as Array<Record<string, unknown>>;
        if (rows.length === 0) continue;
        const columns = Object.keys(rows[0]!);
        const insert = snap.prepare(`INSERT INTO ${table.name} (${columns.join(", ")}) VALUES (${columns.map((c) => `@${c}`).join(", ")})`);
        snap.transaction(() => {
          for (const row of rows) insert.run(row);
        })();
        if (table.name === "tasks") tasks = rows.length;
      }
      return { bytes: snap.serialize(), queues: [...queues], tasks };
    } finally {
      snap.close();
    }
  }

  /**
   * Loads a snapshot's rows in one write (one transaction with the node's other writes
   * of the turn). Rows of the same queues already here are stale (left by an earlier
   * stay of the partition, never shown: this node did not hold it) and are deleted first,
   * so plain INSERTs fire the count triggers exactly once per row (an INSERT OR REPLACE
   * would skip the delete trigger). `stale` names more queues whose rows here are stale
   * (other queues of the same partition, left by an earlier stay), deleted in the same
   * write; `alsoInWrite` runs inside it too (recording the rows' log position). Resolves
   * the queues and task count it held.
   */
  load(bytes: Buffer, stale: readonly string[] = [], alsoInWrite: () => void = () => {}): { queues: string[]; tasks: number } {
    const snap = new BetterSqlite3(bytes);
    try {
      const present = (name: string) => snap.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
      const queues = new Set<string>();
      for (const [table, column] of [["tasks", "queue"], ["queues", "name"], ["group_configs", "queue"], ["schedules", "queue"], ["slot_limits", "scope"]] as const) {
        if (present(table)) for (const q of snap.prepare(`SELECT DISTINCT ${column} FROM ${table}`).pluck().all() as string[]) queues.add(q);
      }
      let tasks = 0;
      this.db.write(() => {
        this.deleteRows([...new Set([...queues, ...stale])]);
        for (const table of TABLES) {
          if (!present(table.name)) continue;
          let insert: BetterSqlite3.Statement | undefined;
          for (const row of snap.prepare(`SELECT * FROM ${table.name}`).iterate() as Iterable<Record<string, unknown>>) {
            insert ??= this.db.sqlite.prepare(`INSERT INTO ${table.name} (${Object.keys(row).join(", ")}) VALUES (${Object.keys(row).map((c) => `@${c}`).join(", ")})`);
            insert.run(row);
            if (table.name === "tasks") tasks++;
          }
        }
        alsoInWrite();
      });
      return { queues: [...queues], tasks };
    } finally {
      snap.close();
    }
  }

  /** Deletes every row of `queues` in one write; returns the tasks deleted. */
  drop(queues: readonly string[]): number {
    return this.db.write(() => this.deleteRows(queues));
  }

  /** Deletes every row of `queues` (inside a write), their per-state counts too; returns the tasks deleted. */
  private deleteRows(queues: readonly string[]): number {
    const list = JSON.stringify(queues);
    let tasks = 0;
    // Attempts first: their rows are found through the tasks.
    for (const table of [TABLES[1]!, TABLES[0]!, ...TABLES.slice(2), COUNTS]) {
      const changes = this.db.sqlite.prepare(`DELETE FROM ${table.name} WHERE ${table.where}`).run({ queues: list }).changes;
      if (table.name === "tasks") tasks = changes;
    }
    return tasks;
  }
}
