/**
 * Argument checks shared by every ChangeLog implementation, so that both refuse the same
 * bad input with the same catalog error (and store nothing).
 */
import { invalidField } from "../base/errors.js";
import { ENTRY_BYTES_MAX } from "./changelog.js";
import { framedBytes } from "./entry-frame.js";

export function checkPartition(partition: number): void {
  if (!Number.isSafeInteger(partition) || partition < 0) throw invalidField("partition", `must be an integer ≥ 0, got ${partition}`);
}

/** A sequence argument: `min` is 0 for an expected last sequence, 1 for a position to read or purge from. */
export function checkSeq(field: string, seq: number, min: 0 | 1): void {
  if (!Number.isSafeInteger(seq) || seq < min) throw invalidField(field, `must be an integer ≥ ${min}, got ${seq}`);
}

export function checkRecords(records: readonly Uint8Array[]): void {
  if (records.length === 0) throw invalidField("records", "an entry needs at least one record");
  const bytes = framedBytes(records);
  if (bytes > ENTRY_BYTES_MAX) throw invalidField("records", `an entry is at most ${ENTRY_BYTES_MAX} bytes framed, got ${bytes}: split it`);
}

export function checkMaxEntries(maxEntries: number): void {
  if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) throw invalidField("maxEntries", `must be an integer ≥ 1, got ${maxEntries}`);
}

/** Everything an append (or a fence, its records `[mark]`) must satisfy before it is sent: the same for every implementation. */
export function checkAppend(partition: number, records: readonly Uint8Array[], expectedLastSeq: number): void {
  checkPartition(partition);
  checkRecords(records);
  checkSeq("expectedLastSeq", expectedLastSeq, 0);
}
