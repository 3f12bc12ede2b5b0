/**
 * Read-only queries for operators (ListQueues, ListTasks) and the retention janitor.
 * They read SQLite directly rather than asking grains: counts and listings are about
 * durable state, and reading them never activates a grain.
 *
 * Counts come from `queue_counts` (migration 009), which triggers keep in step with
 * `tasks`: a few rows per queue, however many finished tasks are retained. Counting the
 * tasks themselves cost an index scan of every stored task on the event loop (~0.2 s at
 * 1M retained tasks, seconds at a day of history).
 */
import { TASK_STATES, type TaskRecord, type TaskState } from "../grains/queue/task.js";
import type { Database } from "./database.js";
import type { RateLimitSpec } from "../grains/queue/token-bucket.js";
import { rowToRecord, type TaskRow } from "./rows.js";

export interface QueueSummary {
  name: string;
  paused: boolean;
  keyLimit?: number;
  rateLimit?: RateLimitSpec;
  counts: Record<TaskState, number>;
}

export interface TaskPage {
  tasks: TaskRecord[];
  /** Opaque cursor for the next page; empty on the last page. */
  nextCursor: string;
}

export class AdminQueries {
  private readonly stmt;

  constructor(private readonly db: Database) {
    const s = db.sqlite;
    this.stmt = {
      queues: s.prepare("SELECT name, paused, key_limit, rate_per_sec, rate_burst FROM queues ORDER BY name"),
      counts: s.prepare("SELECT queue, state, n FROM queue_counts WHERE n > 0"),
      queue: s.prepare("SELECT name, paused, key_limit, rate_per_sec, rate_burst FROM queues WHERE name = ?"),
      queueCounts: s.prepare("SELECT state, n FROM queue_counts WHERE queue = ? AND n > 0"),
      pageByState: s.prepare(`SELECT rowid AS cursor, * FROM tasks WHERE queue = ? AND state = ? AND rowid > ?
        ORDER BY rowid LIMIT ?`),
      pageAll: s.prepare("SELECT rowid AS cursor, * FROM tasks WHERE queue = ? AND rowid > ? ORDER BY rowid LIMIT ?"),
      unfinishedQueues: s.prepare(`SELECT DISTINCT queue FROM queue_counts
        WHERE state IN ('pending','scheduled','retry','active','aggregating') AND n > 0`),
      // Counts from queue_counts; the oldest pending ready_at reads that queue's pending
      // rows only (the (queue, state) index range), never its finished ones.
      depth: s.prepare(`SELECT c.queue, c.state, c.n, CASE WHEN c.state = 'pending' THEN
          (SELECT MIN(t.ready_at) FROM tasks t WHERE t.queue = c.queue AND t.state = 'pending') END AS oldest_ready_at
        FROM queue_counts c WHERE c.state IN ('pending','scheduled','retry','active','aggregating') AND c.n > 0`),
      groupConfigs: s.prepare("SELECT queue, grp, max_size, max_delay_ms, grace_ms FROM group_configs ORDER BY queue, grp"),
      purge: s.prepare(`DELETE FROM tasks WHERE rowid IN
        (SELECT rowid FROM tasks WHERE purge_at > 0 AND purge_at <= ? LIMIT ?)`),
    };
  }

  listQueues(): QueueSummary[] {
    const summaries = new Map<string, QueueSummary>();
    for (const summary of this.queueSettings()) summaries.set(summary.name, summary);
    for (const row of this.stmt.counts.all() as Array<{ queue: string; state: TaskState; n: number }>) {
      let summary = summaries.get(row.queue);
      if (!summary) summaries.set(row.queue, (summary = { name: row.queue, paused: false, counts: emptyCounts() }));
      summary.counts[row.state] = row.n;
    }
    return [...summaries.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Unfinished tasks per queue and state, and when each queue's oldest pending task became
   * ready (for the depth and age gauges). Finished tasks are not counted here: the
   * finished counters cover them, and they can outnumber the live ones by far.
   */
  depth(): Array<{ queue: string; state: TaskState; n: number; oldestReadyAtMs: number | null }> {
    return (this.stmt.depth.all() as Array<{ queue: string; state: TaskState; n: number; oldest_ready_at: number | null }>)
      .map((r) => ({ queue: r.queue, state: r.state, n: r.n, oldestReadyAtMs: r.oldest_ready_at }));
  }

  /** Every known queue's settings, without counting its tasks (cheap). */
  queueSettings(): QueueSummary[] {
    return (this.stmt.queues.all() as QueueRow[]).map(toSummary);
  }

  /** One queue with its counts. */
  queueSummary(queue: string): QueueSummary {
    const row = this.stmt.queue.get(queue) as QueueRow | undefined;
    const summary = row ? toSummary(row) : { name: queue, paused: false, counts: emptyCounts() };
    for (const c of this.stmt.queueCounts.all(queue) as Array<{ state: TaskState; n: number }>) summary.counts[c.state] = c.n;
    return summary;
  }

  listTasks(queue: string, state: TaskState | undefined, pageSize: number, cursor: string): TaskPage {
    const after = cursor === "" ? 0 : Number(cursor);
    if (!Number.isSafeInteger(after) || after < 0) throw new Error("bad cursor");
    const rows = (state
      ? this.stmt.pageByState.all(queue, state, after, pageSize + 1)
      : this.stmt.pageAll.all(queue, after, pageSize + 1)) as Array<TaskRow & { cursor: number }>;
    const page = rows.slice(0, pageSize);
    return {
      tasks: page.map(rowToRecord),
      nextCursor: rows.length > pageSize ? String(page.at(-1)!.cursor) : "",
    };
  }

  /** Every stored group override (group "" = a queue's default). */
  listGroupConfigs(): Array<{ queue: string; group: string; maxSize: number; maxDelayMs: number; graceMs: number }> {
    type Row = { queue: string; grp: string; max_size: number; max_delay_ms: number; grace_ms: number };
    return (this.stmt.groupConfigs.all() as Row[]).map((r) => ({
      queue: r.queue, group: r.grp, maxSize: r.max_size, maxDelayMs: r.max_delay_ms, graceMs: r.grace_ms,
    }));
  }

  /** Queues with unfinished tasks: their grains are activated when the node starts. */
  queuesWithUnfinishedTasks(): string[] {
    return (this.stmt.unfinishedQueues.all() as Array<{ queue: string }>).map((r) => r.queue);
  }

  /** Deletes up to `limit` finished tasks whose retention is over; returns how many. */
  purgeFinished(nowMs: number, limit: number): number {
    return this.db.write(() => this.stmt.purge.run(nowMs, limit).changes);
  }
}

type QueueRow = { name: string; paused: number; key_limit: number | null; rate_per_sec: number | null; rate_burst: number | null };

function toSummary(row: QueueRow): QueueSummary {
  return {
    name: row.name, paused: row.paused === 1, counts: emptyCounts(),
    ...(row.key_limit !== null ? { keyLimit: row.key_limit } : {}),
    ...(row.rate_per_sec !== null ? { rateLimit: { ratePerSec: row.rate_per_sec, burst: row.rate_burst ?? 1 } } : {}),
  };
}

function emptyCounts(): Record<TaskState, number> {
  return Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as Record<TaskState, number>;
}
