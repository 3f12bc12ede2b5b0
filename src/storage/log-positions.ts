/**
 * Where this node's rows of each partition stand on the partition's changelog (cluster
 * part 2; table `partition_log`, migration 011). A position (p, seq) is a promise: the
 * rows of p's queues here are exactly the log's entries up to `seq`. It is written in
 * the same write as the rows it describes (a catch-up's last page, a handoff's load), and
 * removed in the write that makes it untrue: when this node starts owning p, its own turns
 * reach its file before the log (SQLite first, then the log), so an owner's rows may run
 * ahead of the log and a crashed owner's rows cannot be trusted. Without a position a
 * claim rebuilds p's rows from the log.
 */
import type { Database } from "./database.js";

export class LogPositions {
  private readonly stmt;

  constructor(private readonly db: Database) {
    const s = db.sqlite;
    this.stmt = {
      get: s.prepare("SELECT seq FROM partition_log WHERE partition = ?").pluck(),
      set: s.prepare("INSERT INTO partition_log (partition, seq) VALUES (?, ?) ON CONFLICT (partition) DO UPDATE SET seq = excluded.seq"),
      clear: s.prepare("DELETE FROM partition_log WHERE partition = ?"),
    };
  }

  /** The log sequence p's rows here are exactly at; undefined when not known. */
  get(p: number): number | undefined {
    return this.stmt.get.get(p) as number | undefined;
  }

  /** Records that p's rows are exactly the log up to `seq` (inside the write that made them so, or as a write of its own). */
  set(p: number, seq: number): void {
    this.db.write(() => this.stmt.set.run(p, seq));
  }

  /** p's rows are no longer known to match the log (this node is about to own it). */
  clear(p: number): void {
    this.db.write(() => this.stmt.clear.run(p));
  }
}
