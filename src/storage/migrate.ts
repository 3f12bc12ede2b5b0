import type BetterSqlite3 from "better-sqlite3";
import { MIGRATIONS } from "./migrations/index.js";

export const LATEST_SCHEMA_VERSION = MIGRATIONS.at(-1)?.version ?? 0;

/** A data file's schema after migration. */
export interface SchemaInfo {
  /** The newest migration applied. */
  version: number;
  /** When the first migration was applied (the file's creation, in practice), epoch ms. */
  createdAtMs: number;
}

/** The file has no conveyor schema although one was expected (see `requireExisting`). */
export class MissingSchemaError extends Error {
  override readonly name = "MissingSchemaError";
}

/** The file's schema is newer than this binary's. */
export class NewerSchemaError extends Error {
  override readonly name = "NewerSchemaError";
}

/**
 * Applies every migration newer than the file's version; refuses a file from the future.
 * With `requireExisting`, a file without a conveyor schema is refused before anything is
 * written to it (the caller knows the file should hold one).
 */
export function migrate(db: BetterSqlite3.Database, options: { requireExisting?: boolean } = {}): SchemaInfo {
  const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get() !== undefined;
  if (!hasTable && options.requireExisting) throw new MissingSchemaError("it holds no conveyor schema");
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`);
  const row = db.prepare("SELECT MAX(version) AS v FROM schema_migrations").get() as { v: number | null };
  const current = row.v ?? 0;
  if (current === 0 && options.requireExisting) throw new MissingSchemaError("it holds no conveyor schema");
  if (current > LATEST_SCHEMA_VERSION) {
    throw new NewerSchemaError(`its schema version ${current} is newer than this conveyord's (${LATEST_SCHEMA_VERSION}); upgrade conveyord`);
  }
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue;
    db.transaction(() => {
      db.exec(m.sql);
      db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, Date.now());
    })();
  }
  const info = db.prepare("SELECT MAX(version) AS version, MIN(applied_at) AS createdAtMs FROM schema_migrations").get() as SchemaInfo;
  return info;
}
