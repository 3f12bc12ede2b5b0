/**
 * The snapshot store port (issue 14, "Snapshots"): per partition, its rows as of a log
 * sequence, so that the log can be purged below what every standby has applied and a
 * node that owns or stands by for a partition without local rows starts from the
 * snapshot plus the log after it. Two implementations: `JetStreamSnapshotStore` (the NATS
 * JetStream object store, on the ChangeLog's connection) and `MemorySnapshotStore` (in
 * memory, with injectable outages); `test/cluster/snapshot-store-contract.test.ts` runs
 * one suite against both.
 *
 * Nothing NATS-specific here, as in changelog.ts: a sequence is the ChangeLog's, the
 * bytes are opaque to the store (today `PartitionRows.snapshot()`'s SQLite file).
 *
 * The rules every implementation keeps:
 * - A snapshot becomes visible only once complete: `latest` never returns a half-written
 *   one, whatever happened to its put.
 * - `latest` answers the complete snapshot with the highest sequence, so a late or stale
 *   put of an older sequence (a paused old owner) never hides a newer one; such a put is
 *   accepted and changes nothing.
 * - A completed put removes the partition's older snapshots: at rest a partition holds one.
 * - A put that rejects may or may not have stored its snapshot (its acknowledgement may be
 *   what was lost): the caller must not count on it, e.g. purge the log below it.
 */

/** A partition's rows as of log sequence `seq`: they reflect every log entry ≤ seq and none after. */
export interface Snapshot {
  seq: number;
  bytes: Uint8Array;
}

/**
 * Operations reject with an Error saying why when the store cannot answer now (no
 * leader, no connection); they may be retried. Bad arguments are refused with an
 * INVALID_FIELD catalog error and change nothing.
 */
export interface SnapshotStore {
  /**
   * Stores `bytes` as `partition`'s snapshot at log sequence `seq` (≥ 0; 0: before any
   * entry), then removes the partition's older snapshots, and resolves once both are
   * done (if the removal fails the put rejects, and the next put removes them). If a
   * snapshot of a higher sequence is already stored, nothing is stored; one of the same
   * sequence is replaced. The store may read `bytes` until the put settles: do not
   * change them meanwhile.
   */
  put(partition: number, seq: number, bytes: Uint8Array): Promise<void>;
  /** The partition's newest complete snapshot, or undefined if it has none. */
  latest(partition: number): Promise<Snapshot | undefined>;
  /**
   * The sequences of the partition's complete snapshots, ascending: one once a put has
   * resolved, more only while a put is removing the older ones or after it rejected.
   * For status and tests.
   */
  seqs(partition: number): Promise<number[]>;
  /** Stops using the store; later calls reject. */
  close(): Promise<void>;
}
