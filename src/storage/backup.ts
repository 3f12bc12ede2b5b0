/**
 * Online backup of a node's data file, from a second process (`conveyord backup`).
 *
 * SQLite's backup API copies the database page by page from a read-only connection of
 * its own; in WAL mode a reader never blocks the node's writer, nor the writer the
 * reader. The copy is one consistent snapshot: every page goes in a single backup
 * step, which runs inside one read transaction (copied in small steps, a write by the
 * node between two steps would restart the copy, and under steady writes it might
 * never finish). So the backup holds every write that was committed, and so
 * acknowledged, before it started.
 *
 * The copy is written next to the target under a temporary name, switched to a
 * rollback journal (one self-contained file, no -wal/-shm), checked with
 * `PRAGMA quick_check`, synced, and only then renamed into place: a file at the
 * target path is always a complete backup.
 */
import BetterSqlite3 from "better-sqlite3";
import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";

export interface BackupResult {
  /** The backup file (absolute). */
  file: string;
  bytes: number;
  /** Tasks in the backup, in any state. */
  tasks: number;
  /** The data file's schema version (its newest migration). */
  schemaVersion: number;
  elapsedMs: number;
}

/** SQLite's own limit on pages per backup step: the whole file in one step. */
const ALL_PAGES = 0x7fffffff;

export async function backupDataFile(source: string, target: string, options: { overwrite?: boolean } = {}): Promise<BackupResult> {
  const started = performance.now();
  const from = resolve(source);
  const file = resolve(target);
  if (!existsSync(from)) throw new Error(`no data file at ${from}`);
  if (file === from) throw new Error("the backup cannot overwrite the data file itself");
  if (existsSync(file) && !options.overwrite) throw new Error(`${file} already exists (--force replaces it)`);
  if (!existsSync(dirname(file))) throw new Error(`the folder ${dirname(file)} does not exist`);

  const partial = `${file}.partial-${process.pid}`;
  rmSync(partial, { force: true });
  try {
    const live = new BetterSqlite3(from, { readonly: true, fileMustExist: true });
    try {
      live.pragma("busy_timeout = 5000");
      schemaVersionOf(live, from); // refuse a file that is not conveyor's before copying it
      await live.backup(partial, { progress: () => ALL_PAGES });
    } finally {
      live.close();
    }

    const copy = new BetterSqlite3(partial, { fileMustExist: true });
    let tasks: number;
    let schemaVersion: number;
    try {
      copy.pragma("journal_mode = DELETE");
      const check = copy.pragma("quick_check", { simple: true });
      if (check !== "ok") throw new Error(`the copy failed its integrity check: ${String(check)}`);
      schemaVersion = schemaVersionOf(copy, partial);
      tasks = (copy.prepare("SELECT COUNT(*) AS n FROM tasks").get() as { n: number }).n;
    } finally {
      copy.close();
    }
    const fd = openSync(partial, "r+");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(partial, file);
    syncFolder(dirname(file));
    return { file, bytes: statSync(file).size, tasks, schemaVersion, elapsedMs: performance.now() - started };
  } catch (error) {
    for (const leftover of [partial, `${partial}-wal`, `${partial}-shm`, `${partial}-journal`]) rmSync(leftover, { force: true });
    throw error;
  }
}

function schemaVersionOf(db: BetterSqlite3.Database, path: string): number {
  try {
    return (db.prepare("SELECT MAX(version) AS v FROM schema_migrations").get() as { v: number | null }).v ?? 0;
  } catch {
    throw new Error(`${path} is not a conveyor data file (it has no schema_migrations table)`);
  }
}

/** Makes the rename durable (best effort: some filesystems refuse to fsync a folder). */
function syncFolder(folder: string): void {
  try {
    const fd = openSync(folder, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // not supported here; the rename is still atomic
  }
}
