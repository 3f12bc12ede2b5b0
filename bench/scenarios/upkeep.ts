/**
 * What keeping task counts costs on the hot path, in process (no gRPC): a task's SQLite
 * life on a node (insert; activate with RETURNING; complete plus its attempt row), in
 * group-commit-sized transactions, on three files that differ only in how
 * queue_counts is kept:
 *   none      no counts (the triggers dropped): the cost before counts existed;
 *   triggers  migration 009's triggers: one upsert per insert, two per state change;
 *   app       no triggers; the application sums each transaction's deltas per
 *             (queue, state) and writes one upsert per pair at the end (the cheapest
 *             application-side scheme; it needs every writer to know a row's old state).
 * Rounds alternate the variants so that a noisy neighbour hits all three alike, and the
 * cost is this process's CPU time (user + system, process.cpuUsage), which other
 * processes on a shared machine inflate far less than they inflate wall time.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { removeDir, trackDir } from "../processes.js";
import { payloadOf } from "../payload.js";
import type { ResultRow, Scenario } from "../scenario.js";

const VARIANTS = ["none", "triggers", "app"] as const;
type Variant = (typeof VARIANTS)[number];
/** Tasks per transaction: about what one event-loop turn commits under load. */
const PER_TRANSACTION = 64;
const ROUNDS = 30;
const QUEUES = 4;

export const upkeepScenario: Scenario = {
  name: "upkeep",
  description: "SQLite cost per task of keeping queue_counts (triggers vs application code vs none), in process",
  async run(ctx) {
    const perRound = Math.max(PER_TRANSACTION, Math.floor(ctx.options.tasks / ROUNDS / PER_TRANSACTION) * PER_TRANSACTION);
    const dirs: string[] = [];
    const files = new Map<Variant, { dataDir: DataDir; life: TaskLife }>();
    try {
      for (const variant of VARIANTS) {
        const dir = mkdtempSync(join(tmpdir(), `conveyor-bench-upkeep-${variant}-`));
        trackDir(dir);
        dirs.push(dir);
        const dataDir = openDataDir({ dir, synchronous: "normal" });
        if (variant !== "triggers") dataDir.db.sqlite.exec("DROP TRIGGER tasks_count_insert; DROP TRIGGER tasks_count_delete; DROP TRIGGER tasks_count_update;");
        files.set(variant, { dataDir, life: new TaskLife(dataDir.db.sqlite, variant === "app") });
      }
      const micros = new Map<Variant, number>(VARIANTS.map((v) => [v, 0]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const variant of VARIANTS) {
          const t0 = process.cpuUsage();
          files.get(variant)!.life.run(perRound);
          const used = process.cpuUsage(t0);
          micros.set(variant, micros.get(variant)! + used.user + used.system);
        }
        ctx.progress(`upkeep: round ${round + 1}/${ROUNDS}`);
      }
      const tasks = perRound * ROUNDS;
      const us = (v: Variant) => micros.get(v)! / tasks;
      for (const [variant, { dataDir, life }] of files) if (variant !== "none") life.check(dataDir.db.sqlite);
      const extra = (v: Variant) => `${(us(v) - us("none")).toFixed(1)} µs (${((us(v) / us("none") - 1) * 100).toFixed(0)} %)`;
      return VARIANTS.map((variant): ResultRow => ({
        scenario: `upkeep ${variant}`, tasks, seconds: micros.get(variant)! / 1e6 /* CPU seconds */, tasksPerSec: tasks / (micros.get(variant)! / 1e6),
        notes: `${us(variant).toFixed(1)} µs CPU/task (insert, activate, complete + attempt; ${PER_TRANSACTION} per transaction)` +
          (variant === "none" ? "" : `; counts add ${extra(variant)}`),
        details: { microsPerTask: us(variant), perTransaction: PER_TRANSACTION, rounds: ROUNDS },
      }));
    } finally {
      for (const { dataDir } of files.values()) dataDir.close();
      for (const dir of dirs) removeDir(dir);
    }
  },
};

/** One task's writes, as TaskStore issues them (same columns, same RETURNING). */
class TaskLife {
  private readonly stmt;
  private readonly deltas = new Map<string, number>();
  private seq = 0;

  constructor(private readonly db: BetterSqlite3.Database, private readonly appCounts: boolean) {
    this.stmt = {
      insert: db.prepare(`INSERT INTO tasks (id, queue, type, payload, content_type, metadata, state, priority, seq,
        max_retry, retried, created_at, ready_at, timeout_ms, deadline_at, expires_at, unique_key, unique_until,
        concurrency_key, grp, backoff_base_ms, backoff_max_ms, retention_ms, rules)
        VALUES (?, ?, 'bench:task', ?, 'application/json', NULL, 'pending', 4, ?, 25, 0, ?, ?, 0, 0, 0, '', 0, '', '', 0, 0, 86400000, '[]')`),
      activate: db.prepare(`UPDATE tasks SET state = 'active', lease_id = ?, lease_expires_at = ?, attempt_ends_at = 0,
        attempt_started_at = ?, attempt_worker = 'w', attempt_number = 1, expires_at = 0 WHERE id = ? RETURNING *`),
      complete: db.prepare(`UPDATE tasks SET state = 'completed', lease_id = '', lease_expires_at = 0, attempt_ends_at = 0, finished_at = ?,
        result = ?, purge_at = ? + retention_ms WHERE id = ?`),
      attempt: db.prepare(`INSERT OR REPLACE INTO attempts (task_id, number, started_at, ended_at, worker_id, outcome, error)
        VALUES (?, 1, ?, ?, 'w', 'succeeded', '')`),
      count: db.prepare(`INSERT INTO queue_counts (queue, state, n) VALUES (?, ?, ?)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n`),
    };
  }

  /** `n` tasks through their life: inserted in one transaction, activated in the next, completed in a third. */
  run(n: number): void {
    const result = Buffer.from('{"ok":true}');
    for (let from = 0; from < n; from += PER_TRANSACTION) {
      const batch = Array.from({ length: PER_TRANSACTION }, () => ({ id: randomUUID(), queue: `q${this.seq % QUEUES}`, seq: ++this.seq }));
      const now = Date.now();
      this.turn(() => batch.forEach((t) => {
        this.stmt.insert.run(t.id, t.queue, Buffer.from(JSON.stringify(payloadOf(t.seq, now))), t.seq, now, now);
        this.moved(t.queue, undefined, "pending");
      }));
      this.turn(() => batch.forEach((t) => {
        this.stmt.activate.get(`L${t.seq}`, now + 30_000, now, t.id);
        this.moved(t.queue, "pending", "active");
      }));
      this.turn(() => batch.forEach((t) => {
        this.stmt.complete.run(now, result, now, t.id);
        this.stmt.attempt.run(t.id, now, now);
        this.moved(t.queue, "active", "completed");
      }));
    }
  }

  /** Checks the counts against a count of the rows (the benchmark must measure correct upkeep). */
  check(db: BetterSqlite3.Database): void {
    const truth = db.prepare("SELECT queue, state, COUNT(*) AS n FROM tasks GROUP BY queue, state").all();
    const kept = db.prepare("SELECT queue, state, n FROM queue_counts WHERE n <> 0 ORDER BY queue, state").all();
    if (JSON.stringify(truth) !== JSON.stringify(kept)) throw new Error(`upkeep: counts ${JSON.stringify(kept)} != ${JSON.stringify(truth)}`);
  }

  private moved(queue: string, from: string | undefined, to: string): void {
    if (!this.appCounts) return;
    if (from) this.deltas.set(`${queue}\0${from}`, (this.deltas.get(`${queue}\0${from}`) ?? 0) - 1);
    this.deltas.set(`${queue}\0${to}`, (this.deltas.get(`${queue}\0${to}`) ?? 0) + 1);
  }

  private turn(fn: () => void): void {
    this.db.exec("BEGIN IMMEDIATE");
    fn();
    for (const [key, n] of this.deltas) {
      const [queue, state] = key.split("\0") as [string, string];
      if (n !== 0) this.stmt.count.run(queue, state, n);
    }
    this.deltas.clear();
    this.db.exec("COMMIT");
  }
}
