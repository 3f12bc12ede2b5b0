/**
 * Snapshots of the partitions this node owns, and the purge of their changelogs below
 * them (cluster part 2, `cluster_snapshot_every`): what bounds the log, and the replay of
 * a node that takes a partition over or starts to stand by for it without rows of it
 * (log-catch-up.ts starts such a node from the latest snapshot).
 *
 * A snapshot must be exactly the log up to one sequence. An owner's rows run ahead of its
 * log (SQLite first, then the log), so the snapshot is read, in one synchronous step, from
 * the committed state (a read transaction on a second, read-only connection: the open
 * group commit is not in it) while the journal seals the partition's appends at the same
 * instant (TurnJournal.seal): every turn committed by then is in the log's entries up to
 * the sealed entry's sequence, and none committed later. That sequence is the snapshot's.
 *
 * After a snapshot at S is stored, the log is purged below the previous snapshot's
 * sequence, not below S: a standby that lags by less than a snapshot interval keeps
 * following without a gap; one that lags more sees the gap (every entry names its
 * predecessor) and starts again from the snapshot.
 */
import type { Logger } from "pino";
import type { ChangeLog } from "../changelog/changelog.js";
import type { SnapshotStore } from "../changelog/snapshot-store.js";
import type { TurnJournal } from "../changelog/turn-journal.js";
import type { PartitionRows } from "../storage/partition-rows.js";

export interface SnapshotEvents {
  taken?(partition: number, seq: number, bytes: number, ms: number): void;
  purged?(partition: number, entries: number): void;
  failed?(partition: number, err: unknown): void;
}

export interface PartitionSnapshotsDeps {
  journal: TurnJournal;
  rows: PartitionRows;
  store: SnapshotStore;
  log: ChangeLog;
  partitionOf(queue: string): number;
  /** `cluster_snapshot_every`: records appended to a partition between its snapshots (0: none). */
  every: number;
  logger: Logger;
  events?: SnapshotEvents;
}

export class PartitionSnapshots {
  /** Records appended per partition since its last snapshot. */
  private readonly since = new Map<number, number>();
  private readonly running = new Set<number>();

  constructor(private readonly deps: PartitionSnapshotsDeps) {}

  /** `records` of partition p were acknowledged by the log: take a snapshot once enough have been. */
  appended(p: number, records: number): void {
    if (this.deps.every <= 0) return;
    const n = (this.since.get(p) ?? 0) + records;
    this.since.set(p, n);
    if (n >= this.deps.every && !this.running.has(p)) void this.take(p);
  }

  /** Takes p's snapshot now (if p's appends can be sealed now), stores it, purges the log below the previous one. */
  async take(p: number): Promise<{ seq: number; bytes: number } | undefined> {
    const { journal, rows, store, log, partitionOf, logger, events } = this.deps;
    if (this.running.has(p)) return undefined;
    this.running.add(p);
    const started = performance.now();
    try {
      // One synchronous step: the committed rows and the seal of the appends, at one instant.
      const queues = rows.queueNames().filter((q) => partitionOf(q) === p);
      const sealed = journal.seal(p);
      if (!sealed) return undefined; // not open here, or recovering: the next append tries again
      const snapshot = rows.snapshotCommitted(queues);
      this.since.set(p, 0);
      const seq = await sealed;
      const previous = (await store.seqs(p)).filter((s) => s < seq).at(-1);
      await store.put(p, seq, snapshot.bytes);
      const ms = performance.now() - started;
      events?.taken?.(p, seq, snapshot.bytes.length, ms);
      logger.info({ partition: p, seq, bytes: snapshot.bytes.length, tasks: snapshot.tasks, ms: Math.round(ms) }, "partition snapshot stored");
      if (previous !== undefined && previous > 0) {
        const purged = await log.purgeBelow(p, previous);
        if (purged > 0) events?.purged?.(p, purged);
      }
      return { seq, bytes: snapshot.bytes.length };
    } catch (err) {
      events?.failed?.(p, err);
      logger.warn({ err, partition: p }, "could not take a partition snapshot; the next appends try again");
      return undefined;
    } finally {
      this.running.delete(p);
    }
  }
}
