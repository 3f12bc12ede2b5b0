/**
 * The data directory's exclusive lock: one conveyord per directory.
 *
 * The lock is SQLite's own: a small database file (`conveyord.lock`) opened in
 * `locking_mode = EXCLUSIVE` and written once, so this connection holds the file's
 * exclusive (POSIX advisory) lock until it closes. The operating system drops the lock
 * when the process dies, so a node killed with -9 never leaves a stale lock behind, and
 * there is no pid-liveness guessing (a restarted container often reuses the pid). SQLite
 * also keeps two connections of one process apart, so a second node in the same process
 * is refused too.
 *
 * A locked file cannot be read by others, so the holder (pid, host, start time) is
 * recorded beside it in `conveyord.lock.json`, only to name the holder in the refusal.
 */
import BetterSqlite3 from "better-sqlite3";
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";

export const LOCK_FILE = "conveyord.lock";
export const HOLDER_FILE = "conveyord.lock.json";

export interface LockHolder {
  pid: number;
  host: string;
  startedAt: string;
}

/** Another process holds the directory (the message names it and what to do). */
export class DirLockedError extends Error {
  override readonly name = "DirLockedError";
}

export interface DirLock {
  readonly path: string;
  release(): void;
}

/** Takes the directory's lock at once or throws (DirLockedError when another process has it). */
export function lockDir(dir: string): DirLock {
  const path = join(dir, LOCK_FILE);
  const holderPath = join(dir, HOLDER_FILE);
  const db = new BetterSqlite3(path, { timeout: 0 });
  try {
    db.pragma("journal_mode = MEMORY"); // no journal file beside the lock
    db.pragma("locking_mode = EXCLUSIVE");
    // The first write takes the exclusive lock; in EXCLUSIVE mode COMMIT keeps it.
    db.exec("BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS lock (one INTEGER); COMMIT");
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code === "SQLITE_BUSY") throw new DirLockedError(lockedMessage(dir, path, holderPath));
    throw error;
  }
  recordHolder(holderPath);
  return {
    path,
    release() {
      if (!db.open) return;
      rmSync(holderPath, { force: true });
      db.close();
    },
  };
}

/**
 * Best effort: the record only names the holder in a refusal, and a node whose disk is
 * full must still start (it serves reads, and writes resume once space returns).
 */
function recordHolder(path: string): void {
  const holder: LockHolder = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString() };
  try {
    writeFileSync(`${path}.tmp`, `${JSON.stringify(holder)}\n`);
    renameSync(`${path}.tmp`, path);
  } catch {
    try {
      rmSync(`${path}.tmp`, { force: true });
      rmSync(path, { force: true }); // never name a previous holder
    } catch {
      // Nothing more to do: a refusal will then name no holder, or an older one.
    }
  }
}

function lockedMessage(dir: string, lockPath: string, holderPath: string): string {
  const holder = readHolder(holderPath);
  const who = holder
    ? `conveyord pid ${holder.pid} on host ${holder.host} (started ${holder.startedAt})`
    : "another process";
  return `data directory ${dir} is in use by ${who}, which holds ${lockPath}; ` +
    "stop that process first, or give this one its own --data-dir";
}

function readHolder(path: string): LockHolder | undefined {
  try {
    const h = JSON.parse(readFileSync(path, "utf8")) as Partial<LockHolder>;
    return typeof h.pid === "number" && typeof h.host === "string" && typeof h.startedAt === "string" ? h as LockHolder : undefined;
  } catch {
    return undefined;
  }
}
