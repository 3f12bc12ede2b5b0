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
 *   earlier stay, cannot be trusted): p's rows are dropped and rebuilt from the first entry;
 * - an empty log: nothing was ever acknowledged through it, so rows here (written before
 *   the cluster had a log) are kept as they are.
 * Pages of entries are applied one write each, the position moving in the same write, so
 * a catch-up cut short by a crash or a failed read resumes where it stopped. A standby
 * (standby-followers.ts) applies the same entries one by one as the log delivers them
 * (`applyFollowed`), so a takeover by a warm standby catches up only its lag.
 */
import type { Logger } from "pino";
import type { ChangeLog, LogEntry } from "../changelog/changelog.js";
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
  partitionOf(queue: string): number;
  logger: Logger;
}

export interface CatchUpResult {
  /** Entries applied (fences included). */
  entries: number;
  /** Were p's rows here dropped and rebuilt from the log's first entry? */
  rebuilt: boolean;
  ms: number;
}

export class LogCatchUp {
  constructor(private readonly deps: LogCatchUpDeps) {}

  /** Applies p's log entries up to `upTo` (its last sequence, as just read) to the rows here. */
  async to(p: number, upTo: number): Promise<CatchUpResult> {
    const { db, log, positions } = this.deps;
    const started = performance.now();
    if (upTo === 0) return { entries: 0, rebuilt: false, ms: 0 };
    const known = positions.get(p);
    const rebuilt = known === undefined || known > upTo;
    if (rebuilt) this.dropRows(p);
    let at = rebuilt ? 0 : known;
    let entries = 0;
    while (at < upTo) {
      const page: LogEntry[] = (await log.read(p, at + 1, PAGE_ENTRIES)).filter((e) => e.seq <= upTo);
      // The entry at `upTo` is always there (a purge keeps a partition's last entry).
      if (page.length === 0) throw new Error(`partition ${p}'s changelog has no entry between ${at + 1} and ${upTo}; cannot catch up`);
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
    if (entries > 0 || rebuilt) this.deps.logger.info({ partition: p, upTo, ...result, ms: Math.round(result.ms) }, "caught up with the partition's changelog");
    return result;
  }

  /**
   * Makes this node's rows of p a known prefix of its log, for a standby to follow: rows
   * at a position stay (a former standby's, a handoff's); rows with none are dropped and
   * the position set to 0 (the empty prefix). Resolves the sequence to follow after.
   */
  standbyFrom(p: number): number {
    const known = this.deps.positions.get(p);
    if (known !== undefined) return known;
    this.dropRows(p, 0);
    return 0;
  }

  /**
   * Applies one followed entry onto p's rows, in one write that moves the position with
   * it. An entry at or below the position is already in the rows (a handoff's load can
   * move the position past what the follower has delivered) and is skipped. False when
   * p's rows have no position any more: this node has started owning p, and no follower
   * may touch its rows again.
   */
  applyFollowed(p: number, entry: LogEntry): boolean {
    const { db, positions } = this.deps;
    const at = positions.get(p);
    if (at === undefined) return false;
    if (entry.seq <= at) return true;
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

  /** Drops every row of p's queues here (their task-store caches too) in one write, which also sets p's position to `position` (undefined: none). */
  private dropRows(p: number, position?: number): void {
    const { rows, store, partitionOf, db, positions } = this.deps;
    const queues = rows.queueNames().filter((q) => partitionOf(q) === p);
    db.write(() => {
      rows.drop(queues);
      if (position === undefined) positions.clear(p);
      else positions.set(p, position);
    });
    store.forgetQueues(queues);
  }
}
