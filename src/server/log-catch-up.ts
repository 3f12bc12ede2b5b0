/**
 * Brings this node's rows of a partition up to its changelog before the node claims it
 * (cluster part 2): the step that makes a crashed owner's partitions servable elsewhere
 * with nothing acknowledged lost.
 *
 * The log holds every acknowledged turn of the partition, each one record of named
 * effects (change-record.ts), so catching up is applying them, in order, with the same
 * `TaskStore.apply` the owner ran (test/unit/change-record-replay.test.ts proves that
 * this reproduces every row). Where it starts depends on what the rows here are known to
 * be (storage/log-positions.ts):
 * - at a position s (a handoff's rows, a finished catch-up): only the entries after s;
 * - not known (an owner's rows run ahead of the log; a crashed owner's, or rows left by an
 *   earlier stay, cannot be trusted): p's rows are replaced by its latest snapshot (or
 *   dropped, without one) and rebuilt from the entries after it;
 * - entries that no longer continue the position (each names its predecessor, and the
 *   ones between were purged below a snapshot): rebuilt the same way;
 * - an empty log: nothing was ever acknowledged through it, so rows here (written before
 *   the cluster had a log) are kept as they are.
 * Pages of entries are applied one write each, the position moving in the same write, so
 * a catch-up cut short by a crash or a failed read resumes where it stopped. A standby
 * (standby-followers.ts) applies the same entries one by one as the log delivers them
 * (`applyFollowed`), so a takeover by a warm standby catches up only its lag.
 */
import type { Logger } from "pino";
import type { ChangeLog, LogEntry } from "../changelog/changelog.js";
import type { SnapshotStore } from "../changelog/snapshot-store.js";
import { decodeTurn } from "../changelog/change-record.js";
import type { Database } from "../storage/database.js";
import type { LogPositions } from "../storage/log-positions.js";
import type { PartitionRows } from "../storage/partition-rows.js";
import type { TaskStore } from "../storage/task-store.js";

/** Entries read and applied per write. */
const PAGE_ENTRIES = 256;

export interface LogCatchUpDeps {
  log: ChangeLog;
  db: Database;
  store: TaskStore;
  rows: PartitionRows;
  positions: LogPositions;
  /** Where a rebuild starts from, when the cluster keeps snapshots (else from nothing). */
  snapshots?: SnapshotStore;
  partitionOf(queue: string): number;
  logger: Logger;
}

export interface CatchUpResult {
  /** Entries applied (fences included). */
  entries: number;
  /** Were p's rows here replaced (by the latest snapshot, or by nothing) before the entries were applied? */
  rebuilt: boolean;
  ms: number;
}

/** A followed entry does not continue the rows' position: entries between were purged below a snapshot. */
export class LogGap extends Error {
  constructor(readonly partition: number, readonly at: number, readonly entry: LogEntry) {
    super(`partition ${partition}'s changelog has a gap: the rows here are at ${at}, and the next entry (${entry.seq}) follows ${entry.prevSeq}`);
  }
}

export class LogCatchUp {
  constructor(private readonly deps: LogCatchUpDeps) {}

  /**
   * Applies p's log entries up to `upTo` (its last sequence, as just read) to the rows
   * here. Rows without a position, or entries that no longer continue it (purged below a
   * snapshot), are rebuilt from the latest snapshot (or from nothing), once per call.
   */
  async to(p: number, upTo: number): Promise<CatchUpResult> {
    const { db, log, positions } = this.deps;
    const started = performance.now();
    if (upTo === 0) return { entries: 0, rebuilt: false, ms: 0 };
    const known = positions.get(p);
    let rebuilt = known === undefined || known > upTo;
    // Grains of p still in memory (this node held p before) describe the rows as they
    // were: they go before the first page, so none of their timers writes on top of it
    // (a rebuild drops them with the rows it replaces).
    if (!rebuilt && known! < upTo) this.deps.store.forgetQueues(this.queuesOf(p));
    let at = rebuilt ? await this.rebuild(p) : known!;
    /** The snapshot a rebuild started from (0: none). */
    let fromSnapshot = rebuilt ? at : 0;
    let entries = 0;
    while (at < upTo) {
      const page: LogEntry[] = (await log.read(p, at + 1, PAGE_ENTRIES)).filter((e) => e.seq <= upTo);
      // The entry at `upTo` is always there (a purge keeps a partition's last entry).
      if (page.length === 0) throw new Error(`partition ${p}'s changelog has no entry between ${at + 1} and ${upTo}; cannot catch up`);
      const gap = firstGap(page, at);
      if (gap !== undefined) {
        if (rebuilt) throw new LogGap(p, at, gap);
        rebuilt = true;
        at = await this.rebuild(p);
        fromSnapshot = at;
        continue;
      }
      const last = page.at(-1)!.seq;
      db.write(() => {
        for (const entry of page) this.applyEntry(entry);
        positions.set(p, last);
      });
      await db.committed();
      entries += page.length;
      at = last;
    }
    const result = { entries, rebuilt, ms: performance.now() - started };
    if (entries > 0 || rebuilt) this.deps.logger.info({ partition: p, upTo, ...result, ms: Math.round(result.ms), fromSnapshot }, "caught up with the partition's changelog");
    return result;
  }

  /**
   * Makes this node's rows of p a known prefix of its log, for a standby to follow: rows
   * at a position stay (a former standby's, a handoff's); rows with none are replaced by
   * the latest snapshot (or dropped, at position 0: the empty prefix). Resolves the
   * sequence to follow after.
   */
  async standbyFrom(p: number): Promise<number> {
    const known = this.deps.positions.get(p);
    if (known !== undefined) return known;
    return this.rebuild(p);
  }

  /**
   * Applies one followed entry onto p's rows, in one write that moves the position with
   * it. An entry at or below the position is already in the rows (a handoff's load can
   * move the position past what the follower has delivered) and is skipped. False when
   * p's rows have no position any more: this node has started owning p, and no follower
   * may touch its rows again. An entry that does not continue the position (the entries
   * between were purged below a snapshot) clears the position and throws LogGap: the
   * standby starts again from the snapshot.
   */
  applyFollowed(p: number, entry: LogEntry): boolean {
    const { db, positions } = this.deps;
    const at = positions.get(p);
    if (at === undefined) return false;
    if (entry.seq <= at) return true;
    if (entry.prevSeq !== undefined && entry.prevSeq !== at) {
      positions.clear(p);
      throw new LogGap(p, at, entry);
    }
    db.write(() => {
      this.applyEntry(entry);
      positions.set(p, entry.seq);
    });
    return true;
  }

  private applyEntry(entry: LogEntry): void {
    if (entry.kind !== "records") return;
    for (const record of entry.records) {
      const { queue, effects } = decodeTurn(record);
      this.deps.store.apply(queue, effects);
    }
  }

  /** The queues of p with rows here. */
  private queuesOf(p: number): string[] {
    return this.deps.rows.queueNames().filter((q) => this.deps.partitionOf(q) === p);
  }

  /**
   * Replaces p's rows here with its latest snapshot, at the snapshot's sequence, or with
   * nothing at 0 when there is none (or no snapshot store); one write, position included.
   * The task store's caches and the grains of the replaced queues go with the rows.
   */
  private async rebuild(p: number): Promise<number> {
    const { rows, store, db, positions, snapshots } = this.deps;
    const snapshot = await snapshots?.latest(p);
    const queues = this.queuesOf(p);
    if (!snapshot) {
      db.write(() => {
        rows.drop(queues);
        positions.set(p, 0);
      });
    } else {
      const loaded = rows.load(Buffer.from(snapshot.bytes.buffer, snapshot.bytes.byteOffset, snapshot.bytes.byteLength), queues, () => positions.set(p, snapshot.seq));
      queues.push(...loaded.queues);
      this.deps.logger.info({ partition: p, snapshotSeq: snapshot.seq, bytes: snapshot.bytes.byteLength, tasks: loaded.tasks }, "loaded a partition's rows from its latest snapshot");
    }
    store.forgetQueues(queues);
    await db.committed();
    return snapshot?.seq ?? 0;
  }
}

/** The first entry of `page` that does not continue from `at` (entries that do not name their predecessor are taken as continuing). */
function firstGap(page: readonly LogEntry[], at: number): LogEntry | undefined {
  let prev = at;
  for (const entry of page) {
    if (entry.prevSeq !== undefined && entry.prevSeq !== prev) return entry;
    prev = entry.seq;
  }
  return undefined;
}
