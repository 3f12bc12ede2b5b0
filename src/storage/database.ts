/**
 * The node's SQLite file and its group commit.
 *
 * better-sqlite3 is synchronous, so a write costs no event-loop hop; the expensive part
 * of a commit is the fsync. Group commit amortises it: the first write of an event-loop
 * turn opens a transaction, every write of that turn (from any grain, any RPC) joins
 * it, and a `setImmediate` commits it once the turn's I/O callbacks have run. Callers
 * await `committed()` before they answer, so an acknowledged write is always on disk.
 *
 * Each `write` call (one grain turn, one operator action) runs in a SAVEPOINT of its
 * own inside that transaction (the first write needs none: the transaction itself plays
 * that part): if it fails, only its own changes are rolled back and
 * only its caller gets the error (classified by storage-errors.ts); the other writes of
 * the turn still commit. If the commit itself fails, or SQLite abandoned the whole
 * transaction (it may on SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY, SQLITE_NOMEM), every
 * waiter is rejected and `onRollback` listeners (the grain host) drop the grains whose
 * memory now runs ahead of disk.
 */
import BetterSqlite3 from "better-sqlite3";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { migrate, type SchemaInfo } from "./migrate.js";
import { classifyStorageError } from "./storage-errors.js";
import { WalCheckpointer } from "./wal-checkpointer.js";

export type Synchronous = "full" | "normal";
/** Where WAL checkpoints run: on a thread of their own (wal-checkpointer.ts) or inside SQLite's commits. */
export type CheckpointMode = "background" | "inline";

export interface DatabaseOptions {
  /** File path, or ":memory:" for tests. */
  path: string;
  /** "full" survives power loss; "normal" survives process crashes only. */
  synchronous: Synchronous;
  /** Refuse a file without a conveyor schema instead of creating one (see migrate). */
  requireSchema?: boolean;
  /**
   * "background": WAL checkpoints on a thread of their own (wal-checkpointer.ts), what a
   * node's data dir uses; "inline" (the default): SQLite's automatic checkpoints, inside
   * the COMMIT that crosses 1,000 pages. Ignored for ":memory:".
   */
  checkpoints?: CheckpointMode;
  /** Told when background checkpoints stop working and SQLite's own take over. */
  onCheckpointFailure?: ((error: Error, fallback: boolean) => void) | undefined;
}

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class Database {
  readonly sqlite: BetterSqlite3.Database;
  private reader: BetterSqlite3.Database | undefined;
  private readonly path: string;
  /** The directory named in error messages about the disk. */
  readonly dataDir: string;
  /** The file's schema after migration. */
  readonly schema: SchemaInfo;
  private inTransaction = false;
  /** True while a `write` runs (nested writes join its savepoint). */
  private writing = false;
  private readonly savepoint: { open: BetterSqlite3.Statement; release: BetterSqlite3.Statement; undo: BetterSqlite3.Statement };
  private waiters: Waiter[] = [];
  private readonly rollbackListeners: Array<(error: unknown) => void> = [];
  private readonly commitListeners: Array<() => void> = [];
  private readonly undoListeners: Array<(writeId: number) => void> = [];
  private lastWriteId = 0;
  private runningWriteId = 0;
  /** Number of transactions committed; for metrics and tests. */
  commits = 0;
  /** Runs the WAL checkpoints when they are in the background (undefined: SQLite's own). */
  readonly checkpointer: WalCheckpointer | undefined;

  constructor(options: DatabaseOptions) {
    if (options.path !== ":memory:") mkdirSync(dirname(options.path), { recursive: true });
    this.path = options.path;
    this.sqlite = new BetterSqlite3(options.path);
    try {
      this.sqlite.pragma("journal_mode = WAL");
      this.sqlite.pragma(`synchronous = ${options.synchronous.toUpperCase()}`);
      this.sqlite.pragma("busy_timeout = 5000");
      this.sqlite.pragma("foreign_keys = ON");
      this.schema = migrate(this.sqlite, { requireExisting: options.requireSchema ?? false });
      this.checkpointer = options.checkpoints === "background" && options.path !== ":memory:"
        ? new WalCheckpointer(this.sqlite, options.path, { onFailure: options.onCheckpointFailure })
        : undefined;
    } catch (error) {
      this.sqlite.close();
      throw error;
    }
    this.dataDir = options.path === ":memory:" ? options.path : dirname(options.path);
    this.savepoint = {
      open: this.sqlite.prepare("SAVEPOINT write"),
      release: this.sqlite.prepare("RELEASE write"),
      undo: this.sqlite.prepare("ROLLBACK TO write"),
    };
  }

  /**
   * Runs `fn` inside the current group-commit transaction (opening one if needed), in a
   * savepoint of its own: if `fn` throws, its changes alone are undone and the error
   * (a catalog error for SQLite failures) is thrown to this caller only. A write inside
   * a write joins the outer one's savepoint.
   *
   * The first write of a transaction needs no savepoint: the transaction holds nothing
   * else, so rolling it back undoes that write alone. This keeps the common case (one
   * write per transaction) as cheap as before; a savepoint costs SQLite a copy of every
   * page the write touches that existed before it (the statement journal).
   */
  write<T>(fn: () => T): T {
    if (this.writing) return fn();
    const first = !this.inTransaction;
    if (first) {
      try {
        this.sqlite.exec("BEGIN IMMEDIATE");
      } catch (error) {
        throw classifyStorageError(error, this.dataDir, "write");
      }
      this.inTransaction = true;
      setImmediate(() => this.commit());
    }
    this.writing = true;
    const id = (this.runningWriteId = ++this.lastWriteId);
    try {
      if (first) return fn();
      this.savepoint.open.run();
      const result = fn();
      this.savepoint.release.run();
      return result;
    } catch (error) {
      const failure = first ? this.undoAlone(error) : this.undo(error);
      for (const listener of this.undoListeners) listener(id);
      throw failure;
    } finally {
      this.writing = false;
      this.runningWriteId = 0;
    }
  }

  /** The id of the `write` running now (0 outside one): what `onUndo` names when that write is undone. */
  get writeId(): number {
    return this.runningWriteId;
  }

  /** Undoes a failed write that was the transaction's first and only one. */
  private undoAlone(error: unknown): unknown {
    const failure = classifyStorageError(error, this.dataDir, "write");
    if (this.waiters.length > 0) {
      // Someone awaits this transaction after all: it fails for them too.
      this.rollback(classifyStorageError(error, this.dataDir, "commit"));
      return failure;
    }
    try {
      if (this.sqlite.inTransaction) this.sqlite.exec("ROLLBACK");
    } catch {
      // The connection is in trouble; the next BEGIN will say so to its caller.
    }
    this.inTransaction = false;
    return failure;
  }

  /** Undoes the failed write's savepoint; returns the error its caller gets. */
  private undo(error: unknown): unknown {
    const failure = classifyStorageError(error, this.dataDir, "write");
    if (this.sqlite.inTransaction) {
      try {
        this.savepoint.undo.run();
        this.savepoint.release.run();
        return failure;
      } catch {
        // Cannot return to the savepoint: give up the whole transaction below.
      }
    }
    // SQLite has abandoned the transaction (or the savepoint is gone): everyone in it
    // fails, the others for a reason that is not theirs.
    this.rollback(classifyStorageError(error, this.dataDir, "commit"));
    return failure;
  }

  /** Resolves once every write made so far is committed. */
  committed(): Promise<void> {
    if (!this.inTransaction) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  onRollback(listener: (error: unknown) => void): void {
    this.rollbackListeners.push(listener);
  }

  /** Called after each COMMIT, before the transaction's waiters are answered. */
  onCommit(listener: () => void): void {
    this.commitListeners.push(listener);
  }

  /** Called when a write's changes were undone alone (its savepoint rolled back, the transaction going on). */
  onUndo(listener: (writeId: number) => void): void {
    this.undoListeners.push(listener);
  }

  /**
   * A second, read-only connection to the same file, opened on first use: its read
   * transactions see only committed writes (WAL snapshot isolation), never the open
   * group-commit transaction, so a changelog snapshot reads exactly what was committed.
   */
  committedReader(): BetterSqlite3.Database {
    if (this.path === ":memory:") throw new Error("an in-memory database has no second connection");
    this.reader ??= new BetterSqlite3(this.path, { readonly: true, fileMustExist: true });
    return this.reader;
  }

  close(): void {
    this.commit();
    this.checkpointer?.close();
    this.reader?.close();
    this.sqlite.close();
  }

  private commit(): void {
    if (!this.inTransaction) return;
    try {
      this.sqlite.exec("COMMIT");
    } catch (error) {
      this.rollback(classifyStorageError(error, this.dataDir, "commit"));
      return;
    }
    this.inTransaction = false;
    this.commits += 1;
    this.checkpointer?.committed();
    for (const listener of this.commitListeners) listener();
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.resolve();
  }

  private rollback(error: unknown): void {
    if (!this.inTransaction) return;
    try {
      if (this.sqlite.inTransaction) this.sqlite.exec("ROLLBACK");
    } catch {
      // The connection is in trouble; the next BEGIN will say so to its caller.
    } finally {
      this.inTransaction = false;
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w.reject(error);
      for (const listener of this.rollbackListeners) listener(error);
    }
  }
}
