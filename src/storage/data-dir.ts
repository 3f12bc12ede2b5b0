/**
 * Opening a node's data directory: lock it, check its identity, open its database.
 *
 * The directory holds `conveyor.db` (with its -wal and -shm), `node.json` (the identity:
 * node id, creation time, schema version; written atomically when the directory is first
 * initialised) and the lock (dir-lock.ts). The identity is what lets startup tell a new
 * directory from one whose database went missing: a directory that has a node.json must
 * have a database with a conveyor schema in it, or the node refuses to start rather than
 * start empty and silently drop every task.
 *
 * Every refusal is a DataDirError: one line that names the file and says what to do.
 */
import { randomUUID } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Database, type CheckpointMode, type Synchronous } from "./database.js";
import { lockDir, DirLockedError, type DirLock } from "./dir-lock.js";
import { MissingSchemaError, NewerSchemaError } from "./migrate.js";
import { sqliteCodeOf } from "./storage-errors.js";

export const DB_FILE = "conveyor.db";
export const IDENTITY_FILE = "node.json";

export interface NodeIdentity {
  /** Random, chosen when the directory was initialised; never changes. */
  id: string;
  /** When the directory was initialised (ISO 8601). */
  createdAt: string;
  /** The database's schema version, as of the last start. */
  schemaVersion: number;
}

/** A startup refusal. The message is one line: the file, what is wrong, what to do. */
export class DataDirError extends Error {
  override readonly name = "DataDirError";
}

export interface DataDir {
  /** Absolute path. */
  readonly dir: string;
  readonly identity: NodeIdentity;
  readonly db: Database;
  /** How this start found the directory. */
  readonly opened: "initialised" | "adopted" | "existing";
  /** Closes the database (committing what is pending), then releases the lock. */
  close(): void;
}

const RESTORE_OR_RESET = `restore ${DB_FILE} from a backup, or remove the data directory to start a new, empty node`;

export interface OpenDataDirOptions {
  dir: string;
  synchronous: Synchronous;
  /** Where WAL checkpoints run (Database's `checkpoints`); default "background". */
  checkpoints?: CheckpointMode;
  /** Told when the background WAL checkpoints stop working (SQLite's own take over; see wal-checkpointer.ts). */
  onCheckpointFailure?: ((error: Error, fallback: boolean) => void) | undefined;
}

export function openDataDir(options: OpenDataDirOptions): DataDir {
  const dir = resolve(options.dir);
  try {
    mkdirSync(dir, { recursive: true });
  } catch (error) {
    throw new DataDirError(`cannot create the data directory ${dir} (${describe(error)}); check the path and its permissions`);
  }
  let lock: DirLock;
  try {
    lock = lockDir(dir);
  } catch (error) {
    if (error instanceof DirLockedError) throw new DataDirError(error.message);
    throw new DataDirError(`cannot lock the data directory ${dir} (${describe(error)}); check that it is writable`);
  }
  try {
    return open(dir, lock, options);
  } catch (error) {
    lock.release();
    throw error;
  }
}

function open(dir: string, lock: DirLock, options: OpenDataDirOptions): DataDir {
  const identityPath = join(dir, IDENTITY_FILE);
  const dbPath = join(dir, DB_FILE);
  const known = readIdentity(identityPath, dir);
  const size = fileSize(dbPath);
  if (known && (size === undefined || size === 0)) {
    throw new DataDirError(`${dbPath} is ${size === undefined ? "missing" : "empty (0 bytes)"}, but ${dir} holds node ` +
      `${known.id}, initialised ${known.createdAt} (${IDENTITY_FILE}), so its tasks are gone from disk; ` +
      `refusing to start as a new node: ${RESTORE_OR_RESET}`);
  }
  if (!known && size === 0) {
    throw new DataDirError(`${dbPath} is empty (0 bytes) and ${dir} has no ${IDENTITY_FILE}, so it may be a truncated ` +
      "database; restore it from a backup, or remove the file to start a new, empty node");
  }

  let db: Database;
  try {
    // A node's database checkpoints its WAL off the event loop unless told otherwise (wal-checkpointer.ts).
    db = new Database({
      path: dbPath, synchronous: options.synchronous, requireSchema: known !== undefined,
      checkpoints: options.checkpoints ?? "background", onCheckpointFailure: options.onCheckpointFailure,
    });
  } catch (error) {
    throw openFailure(error, dbPath, known);
  }
  try {
    const schemaVersion = db.schema.version;
    if (known) {
      if (known.schemaVersion !== schemaVersion) writeIdentity(identityPath, { ...known, schemaVersion });
      return dataDir(dir, { ...known, schemaVersion }, db, lock, "existing");
    }
    // A new directory, or one from before identities existed (its database has tasks).
    const identity: NodeIdentity = { id: randomUUID(), createdAt: new Date(db.schema.createdAtMs).toISOString(), schemaVersion };
    writeIdentity(identityPath, identity);
    return dataDir(dir, identity, db, lock, size === undefined ? "initialised" : "adopted");
  } catch (error) {
    db.close();
    if (error instanceof DataDirError) throw error;
    throw new DataDirError(`cannot write ${identityPath} (${describe(error)}); check that ${dir} is writable`);
  }
}

function dataDir(dir: string, identity: NodeIdentity, db: Database, lock: DirLock, opened: DataDir["opened"]): DataDir {
  return {
    dir, identity, db, opened,
    close() {
      try {
        db.close();
      } finally {
        lock.release();
      }
    },
  };
}

function openFailure(error: unknown, dbPath: string, known: NodeIdentity | undefined): DataDirError {
  if (error instanceof MissingSchemaError) {
    return new DataDirError(`${dbPath} holds no conveyor tables, but its directory holds node ${known?.id}, initialised ` +
      `${known?.createdAt} (${IDENTITY_FILE}), so its tasks are not in this file; refusing to start as a new node: ${RESTORE_OR_RESET}`);
  }
  if (error instanceof NewerSchemaError) return new DataDirError(`${dbPath}: ${error.message}`);
  const code = sqliteCodeOf(error);
  if (code === "SQLITE_NOTADB" || code?.startsWith("SQLITE_CORRUPT")) {
    return new DataDirError(`${dbPath} is damaged: it is not a valid database (${describe(error)}); ${RESTORE_OR_RESET}`);
  }
  return new DataDirError(`cannot open ${dbPath} (${describe(error)}); check the file, its directory and their permissions`);
}

/** The identity, or undefined for a directory that has none yet. */
function readIdentity(path: string, dir: string): NodeIdentity | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new DataDirError(`cannot read ${path} (${describe(error)}); check its permissions`);
  }
  const bad = (why: string) => new DataDirError(`${path} is not a valid node identity (${why}); restore it from a backup, ` +
    `or remove it to adopt the database in ${dir} as it is`);
  let parsed: Partial<NodeIdentity>;
  try {
    parsed = JSON.parse(text) as Partial<NodeIdentity>;
  } catch {
    throw bad(text.length === 0 ? "the file is empty" : "not JSON");
  }
  if (typeof parsed !== "object" || parsed === null || typeof parsed.id !== "string" || parsed.id === "" ||
      typeof parsed.createdAt !== "string" || typeof parsed.schemaVersion !== "number") {
    throw bad("expected id, createdAt and schemaVersion");
  }
  return { id: parsed.id, createdAt: parsed.createdAt, schemaVersion: parsed.schemaVersion };
}

/** Write to a temp file, flush, rename over, flush the directory: readers see all or nothing. */
function writeIdentity(path: string, identity: NodeIdentity): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(identity, null, 2)}\n`);
  const fd = openSync(tmp, "r+");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  const dirFd = openSync(resolve(path, ".."), "r");
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
}

function fileSize(path: string): number | undefined {
  try {
    return statSync(path).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new DataDirError(`cannot read ${path} (${describe(error)}); check its permissions`);
  }
}

function describe(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  return typeof code === "string" && !message.includes(code) ? `${code}: ${message}` : message;
}
