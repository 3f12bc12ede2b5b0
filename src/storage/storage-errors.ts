/**
 * SQLite failures → catalog errors. A write the caller's own values made fail (a
 * constraint) is not retryable; a full disk is RESOURCE_EXHAUSTED and names the data
 * directory; anything else underneath (I/O, locks, memory) is UNAVAILABLE: retry.
 * The SQLite error stays attached as `cause` for the server log.
 */
import { ConveyorError } from "../base/errors.js";

/** Where the failure happened: one request's write, or the commit shared by many. */
export type FailureScope = "write" | "commit";

/** The SQLite result code of `error` ("SQLITE_FULL", "SQLITE_CONSTRAINT_CHECK", ...), if it has one. */
export function sqliteCodeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_") ? code : undefined;
}

/** Codes that mean "this request's values cannot be stored", whoever retries them. */
function isCallersFault(code: string): boolean {
  return code.startsWith("SQLITE_CONSTRAINT") || code === "SQLITE_TOOBIG" || code === "SQLITE_MISMATCH" || code === "SQLITE_RANGE";
}

/**
 * The catalog error for a storage failure, or `error` itself when it is not a SQLite
 * error (a bug: the caller reports it as it always did). `dataDir` is named in
 * messages about the disk.
 */
export function classifyStorageError(error: unknown, dataDir: string, scope: FailureScope): unknown {
  if (error instanceof ConveyorError) return error;
  const code = sqliteCodeOf(error);
  if (code === undefined) return error;
  const detail = `${code}: ${short((error as Error).message)}`;
  const cause = { cause: error };
  if (code === "SQLITE_FULL") {
    return new ConveyorError("RESOURCE_EXHAUSTED", "DISK_FULL",
      `disk full: the data directory ${dataDir} has no space left, so this write was not stored (${detail}); ` +
      "reads still work and writes resume once space is freed", undefined, cause);
  }
  // At commit time a constraint is the transaction's, not one caller's: every caller in
  // it failed for a reason that is not theirs.
  if (isCallersFault(code) && scope === "write") {
    return new ConveyorError("INVALID_ARGUMENT", "STORAGE_REJECTED",
      `the data file refused to store this request (${detail}); sending it again will fail the same way`, undefined, cause);
  }
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") {
    return new ConveyorError("UNAVAILABLE", "STORAGE_FAILURE",
      `the data file in ${dataDir} is damaged (${detail}); an operator must restore it from a backup`, undefined, cause);
  }
  if (code.startsWith("SQLITE_READONLY")) {
    return new ConveyorError("UNAVAILABLE", "STORAGE_FAILURE",
      `the data file in ${dataDir} cannot be written (${detail}); retry once it is writable`, undefined, cause);
  }
  return new ConveyorError("UNAVAILABLE", "STORAGE_FAILURE", `storage write failed (${detail}); retry`, undefined, cause);
}

/** SQLite messages quote no caller values, but a trigger's RAISE text is free-form: keep it short. */
function short(message: string): string {
  return message.length <= 200 ? message : `${message.slice(0, 200)}…`;
}
