/**
 * The changelog port (issue 14): a replicated, append-only log per partition, the record
 * of every acknowledged write so that a partition survives the loss of its node. Two
 * implementations: `JetStreamChangeLog` (NATS JetStream, one R3 file stream, one subject
 * per partition) and `MemoryChangeLog` (in memory, with injectable outages, for unit and
 * simulation tests). `test/cluster/changelog-contract.test.ts` runs one suite against
 * both, so the fake stays honest.
 *
 * Why a port: replication is done by a proven engine, never by code of ours, but the
 * owner/standby/fencing logic built on it must be testable with faults and simulated
 * time, and another engine could replace JetStream. So nothing NATS-specific appears
 * here: sequences are plain numbers, records are opaque bytes.
 *
 * Sequences. Every entry gets a sequence when it is stored; sequences grow within a
 * partition, but are not dense (they are shared by all partitions of the log, like a
 * JetStream stream's sequence). A partition with no entry has last sequence 0.
 *
 * Fencing. Every append names the last sequence the writer believes its partition has;
 * if another entry was stored since, the append is refused (`fenced`) and stores nothing.
 * A new owner replays to the last sequence and appends a fence entry; from then on any
 * append by the old owner is refused, so a paused or cut-off zombie can never again get
 * a write acknowledged.
 */

/** An entry as read back: records a writer appended together, or a fence. */
export interface LogEntry {
  /** The sequence the log gave the entry. */
  seq: number;
  kind: EntryKind;
  /** The records, in the order appended; a fence holds one record (the fence mark). */
  records: Uint8Array[];
  /**
   * The partition's last sequence when this entry was appended (its append's expected last
   * sequence): the entry before it. A reader that has applied up to s and reads an entry
   * whose `prevSeq` is not s has missed entries (purged below a snapshot). Undefined for
   * entries written before it was recorded.
   */
  prevSeq?: number;
}

export type EntryKind = "records" | "fence";

/** Why an append's outcome is unknown: it may or may not have been stored. */
export type UnknownReason =
  /** No acknowledgement within the append timeout (a leader change, a slow quorum). */
  | "timeout"
  /** The log answered that it has no leader or quorum for the partition now. */
  | "no_quorum"
  /** The connection to the log is down or closed. */
  | "unavailable";

/**
 * What became of an append. Only `ok` means stored on a quorum. `fenced` means nothing
 * was stored because the partition's last sequence is not the one expected: someone
 * else wrote (the writer has lost the partition). `unknown` means the entry may still
 * appear later: the writer must stop, re-read the last sequence, and treat whatever is
 * there as written.
 */
export type AppendOutcome =
  | { kind: "ok"; seq: number }
  | { kind: "fenced"; lastSeq?: number; detail: string }
  | { kind: "unknown"; reason: UnknownReason; detail: string };

/**
 * The operations other than append reject (with an Error saying why) when the log cannot
 * answer now (no leader, no connection); they change nothing and may be retried. Append
 * never rejects for that: it reports an `unknown` outcome. Bad arguments are refused with
 * an INVALID_FIELD catalog error by every method.
 */
export interface ChangeLog {
  /** The log's name as operators see it (JetStream: the stream's), for status and logs. */
  readonly stream: string;
  /** Who leads the log now ("" while nobody does), for status; rejects if the log cannot answer. */
  leader(): Promise<string>;
  /**
   * Appends `records` as one entry to `partition` if its last sequence is
   * `expectedLastSeq` (0: the partition has no entry). At most one append per partition
   * should be in flight (see PartitionAppender, which batches the ones that wait).
   */
  append(partition: number, records: readonly Uint8Array[], expectedLastSeq: number): Promise<AppendOutcome>;
  /** Appends a fence entry holding `mark` (who fenced, at which epoch), under the same rule as `append`. */
  appendFence(partition: number, mark: Uint8Array, expectedLastSeq: number): Promise<AppendOutcome>;
  /**
   * The partition's last sequence now (0 if it has no entry), as read from the log's leader.
   * This, `read` and `purgeBelow` reject with UNAVAILABLE / LOG_UNAVAILABLE (a
   * ConveyorError, retryable) when the log cannot answer now: no leader, a timeout, the
   * connection down.
   */
  lastSeq(partition: number): Promise<number>;
  /**
   * The partition's entries with sequence ≥ `fromSeq`, in order, at most `maxEntries`
   * of them; an empty list when there are none. Page by reading again from the last
   * returned sequence + 1.
   */
  read(partition: number, fromSeq: number, maxEntries: number): Promise<LogEntry[]>;
  /**
   * Removes the partition's entries with sequence < `belowSeq`, except that its last
   * entry is always kept (so its last sequence, which fencing relies on, never goes back
   * to 0). Resolves with the number of entries removed.
   */
  purgeBelow(partition: number, belowSeq: number): Promise<number>;
  /**
   * Delivers the partition's entries with sequence > `afterSeq` to `onEntry`, in order and
   * without gaps, one at a time (the next only once `onEntry` resolved), then each new entry
   * as it is stored, until the follower is stopped: how a standby keeps a warm copy. A
   * follower that loses the log (a leader change, the connection down) resumes by itself
   * after the last entry it delivered. `pending` is how many entries the log held beyond
   * this one when it was delivered (the follower's lag). An `onEntry` that throws stops
   * the follower (`stopped` rejects with its error).
   */
  follow(partition: number, afterSeq: number, onEntry: (entry: LogEntry, pending: number) => void | Promise<void>): Follower;
  close(): Promise<void>;
}

/** A running `ChangeLog.follow`. */
export interface Follower {
  /** Stops delivering; resolves once no `onEntry` call is running. */
  stop(): Promise<void>;
  /** Settles when the follower ends: resolves on stop, rejects with the error of an `onEntry` that threw. */
  readonly stopped: Promise<void>;
}

/**
 * The largest entry (records plus framing) any implementation accepts. A grain turn is
 * never split across entries (a turn is atomic on the log as in SQLite), and one turn's
 * record is bounded by what one request may carry (REQUEST_MAX_BYTES, 4 MiB: an enqueue
 * batch's payloads, a settle's results) plus the index entries: under 5 MiB. NATS' default
 * max_payload (1 MiB) is below that, so the changelog needs nats-server configured with
 * `max_payload: 8MB` (NATS' own recommended ceiling); JetStreamChangeLog.open refuses a
 * server with less. 4 KiB is left for the message's headers.
 */
export const NATS_MAX_PAYLOAD_REQUIRED = 8 * 1024 * 1024;
export const ENTRY_BYTES_MAX = NATS_MAX_PAYLOAD_REQUIRED - 4 * 1024;

/** The NATS servers are reachable but set up so the changelog cannot work (retrying will not help). */
export class ChangeLogConfigError extends Error {}
