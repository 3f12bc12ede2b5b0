/**
 * Argument checks shared by every SnapshotStore implementation, so that both refuse the
 * same bad input with the same catalog error (and store nothing).
 */
import { invalidField } from "../base/errors.js";
import { checkPartition, checkSeq } from "./append-checks.js";

/** What a put must satisfy before anything is sent. */
export function checkSnapshotPut(partition: number, seq: number, bytes: Uint8Array): void {
  checkPartition(partition);
  // 0 is allowed: rows that predate the partition's first log entry.
  checkSeq("seq", seq, 0);
  if (!(bytes instanceof Uint8Array)) throw invalidField("bytes", `must be a Uint8Array, got ${typeof bytes}`);
  // A partition's rows are a SQLite file, never empty: an empty buffer is a caller's bug,
  // and stored it would replace real rows and let the log be purged below them.
  if (bytes.byteLength === 0) throw invalidField("bytes", "a snapshot is never empty");
}
