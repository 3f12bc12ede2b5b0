/**
 * The node's SQLite file and its group commit.
 *
 * better-sqlite3 is synchronous, so a write costs no event-loop hop; the expensive part
 * of a commit is the fsync. Group commit amortises it: the first write of an event-loop
 * turn opens a transaction, every write of that turn (from any grain, any RPC) joins
 * it, and a `setImmediate` commits it once the turn's I/O callbacks have run. Callers
 * await `committed()` before they answer, so an acknowledged write is always on disk.
 *
 * If a write or the commit fails, the whole transaction is rolled back and every
 * waiter is rejected; `onRollback` listeners (the grain host) then drop the grains
 * whose memory now runs ahead of disk.
 */
import BetterSqlite3 from "better-sqlite3";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { migrate } from "./migrate.js";

export type Synchronous = "full" | "normal";

export interface DatabaseOptions {
  /** File path, or ":memory:" for tests. */
  path: string;
  /** "full" survives power loss; "normal" survives process crashes only. */
  synchronous: Synchronous;
}

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class Database {
  readonly sqlite: BetterSqlite3.Database;
  private inTransaction = false;
  private waiters: Waiter[] = [];
  private readonly rollbackListeners: Array<(error: unknown) => void> = [];
  /** Number of transactions committed; for metrics and tests. */
  commits = 0;

  constructor(options: DatabaseOptions) {
    if (options.path !== ":memory:") mkdirSync(dirname(options.path), { recursive: true });
    this.sqlite = new BetterSqlite3(options.path);
    this.sqlite.pragma("journal_mode = WAL");
    this.sqlite.pragma(`synchronous = ${options.synchronous.toUpperCase()}`);
    this.sqlite.pragma("busy_timeout = 5000");
    this.sqlite.pragma("foreign_keys = ON");
    migrate(this.sqlite);
  }

  /** Runs `fn` inside the current group-commit transaction, opening one if needed. */
  write<T>(fn: () => T): T {
    if (!this.inTransaction) {
      this.sqlite.exec("BEGIN IMMEDIATE");
      this.inTransaction = true;
      setImmediate(() => this.commit());
    }
    try {
      return fn();
    } catch (error) {
      this.rollback(error);
      throw error;
    }
  }

  /** Resolves once every write made so far is committed. */
  committed(): Promise<void> {
    if (!this.inTransaction) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  onRollback(listener: (error: unknown) => void): void {
    this.rollbackListeners.push(listener);
  }

  close(): void {
    this.commit();
    this.sqlite.close();
  }

  private commit(): void {
    if (!this.inTransaction) return;
    try {
      this.sqlite.exec("COMMIT");
    } catch (error) {
      this.rollback(error);
      return;
    }
    this.inTransaction = false;
    this.commits += 1;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.resolve();
  }

  private rollback(error: unknown): void {
    if (!this.inTransaction) return;
    try {
      if (this.sqlite.inTransaction) this.sqlite.exec("ROLLBACK");
    } finally {
      this.inTransaction = false;
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w.reject(error);
      for (const listener of this.rollbackListeners) listener(error);
    }
  }
}
