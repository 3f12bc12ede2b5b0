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
 * a catch-up cut short by a crash or a failed read resumes where it stopped.
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
        for (const entry of page) {
          if (entry.kind !== "records") continue;
          for (const record of entry.records) {
            const { queue, effects } = decodeTurn(record);
            this.deps.store.apply(queue, effects);
          }
        }
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

  /** Drops every row of p's queues here (their task-store caches too), and its position, in one write. */
  private dropRows(p: number): void {
    const { rows, store, partitionOf, db, positions } = this.deps;
    const queues = rows.queueNames().filter((q) => partitionOf(q) === p);
    db.write(() => {
      rows.drop(queues);
      positions.clear(p);
    });
    store.forgetQueues(queues);
  }
}
