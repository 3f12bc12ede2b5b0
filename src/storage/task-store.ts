/**
 * The grain's durable store (the `QueueStore` port) over SQLite. Every statement is
 * prepared once. Writes run inside the database's group-commit transaction.
 */
import type { Effect, TransitionOutcome } from "../grains/queue/effects.js";
import type { QueueSettings, QueueStore } from "../grains/queue/ports.js";
import type { TaskIndexEntry, TaskRecord, TaskState } from "../grains/queue/task.js";
import type { RateLimitSpec } from "../grains/queue/token-bucket.js";
import type { GroupConfig } from "../grains/queue/group-aggregator.js";
import type { TaskRule } from "../grains/queue/rules.js";
import type { Database } from "./database.js";
import { rowToRecord, toBuffer, type TaskRow } from "./rows.js";

const UNFINISHED = "('pending','scheduled','retry','active','aggregating')";

export interface TaskStoreOptions {
  /** How long archived and cancelled tasks are kept before the janitor deletes them. */
  deadRetentionMs: number;
}

export class TaskStore implements QueueStore {
  private readonly knownQueues = new Set<string>();
  private readonly stmt;

  constructor(private readonly db: Database, private readonly options: TaskStoreOptions) {
    // A rolled-back transaction may have taken queue rows with it.
    db.onRollback(() => this.knownQueues.clear());
    const s = db.sqlite;
    this.stmt = {
      /** Params: every column of a new task, in table order up to lease columns. */
      insert: s.prepare(`INSERT INTO tasks (id, queue, type, payload, content_type, metadata, state, priority, seq,
        max_retry, retried, created_at, ready_at, timeout_ms, deadline_at, expires_at, unique_key, unique_until,
        concurrency_key, grp, backoff_base_ms, backoff_max_ms, retention_ms, rules)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      /**
       * Writes an entry's new state and lease columns. NULL outcome fields keep the
       * stored value; purge_at is set when the task reaches a final state.
       */
      transition: s.prepare(`UPDATE tasks SET state = @state, seq = @seq, retried = @retried, ready_at = @readyAt,
        lease_id = @leaseId, lease_expires_at = @leaseExpiresAt, attempt_ends_at = @attemptEndsAt, expires_at = @expiresAt, batch_id = @batchId,
        last_error = COALESCE(@lastError, last_error), last_failed_at = COALESCE(@lastFailedAt, last_failed_at),
        finished_at = COALESCE(@finishedAt, finished_at), result = COALESCE(@result, result),
        cancel_reason = COALESCE(@cancelReason, cancel_reason),
        purge_at = CASE @state WHEN 'completed' THEN COALESCE(@finishedAt, finished_at) + retention_ms
                               WHEN 'archived' THEN COALESCE(@finishedAt, finished_at) + @deadRetention
                               WHEN 'cancelled' THEN COALESCE(@finishedAt, finished_at) + @deadRetention
                               ELSE 0 END
        WHERE id = @id`),
      /**
       * The hot transitions get statements of their own. activate: pending → active,
       * returning the row a delivery sends (no second read). Params: lease id, lease
       * expiry, attempt end, id.
       */
      activate: s.prepare(`UPDATE tasks SET state = 'active', lease_id = ?, lease_expires_at = ?, attempt_ends_at = ?,
        expires_at = 0 WHERE id = ? RETURNING *`),
      /** complete: active → completed. Params: finished_at, result, finished_at (for purge_at), id. */
      complete: s.prepare(`UPDATE tasks SET state = 'completed', lease_id = '', lease_expires_at = 0, attempt_ends_at = 0, finished_at = ?,
        result = ?, purge_at = ? + retention_ms WHERE id = ?`),
      delete: s.prepare("DELETE FROM tasks WHERE id = ?"),
      ensureQueue: s.prepare("INSERT OR IGNORE INTO queues (name, paused, created_at) VALUES (?, 0, ?)"),
      setPaused: s.prepare(`INSERT INTO queues (name, paused, created_at) VALUES (@name, @value, @now)
        ON CONFLICT (name) DO UPDATE SET paused = @value`),
      setKeyLimit: s.prepare(`INSERT INTO queues (name, key_limit, created_at) VALUES (@name, @value, @now)
        ON CONFLICT (name) DO UPDATE SET key_limit = @value`),
      setRateLimit: s.prepare(`INSERT INTO queues (name, rate_per_sec, rate_burst, created_at) VALUES (@name, @rate, @burst, @now)
        ON CONFLICT (name) DO UPDATE SET rate_per_sec = @rate, rate_burst = @burst`),
      settings: s.prepare("SELECT paused, key_limit, rate_per_sec, rate_burst FROM queues WHERE name = ?"),
      getTask: s.prepare("SELECT * FROM tasks WHERE id = ?"),
      findId: s.prepare("SELECT queue, state FROM tasks WHERE id = ?"),
      unfinished: s.prepare(`SELECT id, state, type, priority, seq, concurrency_key, ready_at, timeout_ms, deadline_at,
        expires_at, unique_key, unique_until, retried, max_retry, backoff_base_ms, backoff_max_ms, lease_id,
        lease_expires_at, attempt_ends_at, grp, batch_id, rules, length(payload) AS payload_bytes FROM tasks WHERE queue = ? AND state IN ${UNFINISHED} ORDER BY rowid`),
      groupConfigs: s.prepare("SELECT grp, max_size, max_delay_ms, grace_ms FROM group_configs WHERE queue = ?"),
      setGroupConfig: s.prepare(`INSERT INTO group_configs (queue, grp, max_size, max_delay_ms, grace_ms)
        VALUES (@queue, @group, @maxSize, @maxDelayMs, @graceMs)
        ON CONFLICT (queue, grp) DO UPDATE SET max_size = @maxSize, max_delay_ms = @maxDelayMs, grace_ms = @graceMs`),
      deleteGroupConfig: s.prepare("DELETE FROM group_configs WHERE queue = ? AND grp = ?"),
      slotLimits: s.prepare("SELECT slot, max_runs FROM slot_limits WHERE scope = ?"),
      setSlotLimit: s.prepare(`INSERT INTO slot_limits (scope, slot, max_runs) VALUES (?, ?, ?)
        ON CONFLICT (scope, slot) DO UPDATE SET max_runs = excluded.max_runs`),
      deleteSlotLimit: s.prepare("DELETE FROM slot_limits WHERE scope = ? AND slot = ?"),
    };
  }

  loadUnfinished(queue: string): TaskIndexEntry[] {
    return (this.stmt.unfinished.all(queue) as IndexRow[]).map(indexRowToEntry);
  }

  loadSettings(queue: string): QueueSettings {
    const row = this.stmt.settings.get(queue) as SettingsRow | undefined;
    const groupConfigs = new Map<string, GroupConfig>();
    for (const g of this.stmt.groupConfigs.all(queue) as GroupConfigRow[]) {
      groupConfigs.set(g.grp, { maxSize: g.max_size, maxDelayMs: g.max_delay_ms, graceMs: g.grace_ms });
    }
    const slotLimits = this.slotLimits(queue);
    if (!row) return { paused: false, groupConfigs, slotLimits };
    return {
      paused: row.paused === 1,
      groupConfigs,
      slotLimits,
      ...(row.key_limit !== null ? { keyLimit: row.key_limit } : {}),
      ...(row.rate_per_sec !== null ? { rateLimit: { ratePerSec: row.rate_per_sec, burst: row.rate_burst ?? 1 } } : {}),
    };
  }

  /** Dynamic limits stored under a scope: a queue, or "" for shared rules. */
  slotLimits(scope: string): Map<string, number> {
    const rows = this.stmt.slotLimits.all(scope) as Array<{ slot: string; max_runs: number }>;
    return new Map(rows.map((r) => [r.slot, r.max_runs]));
  }

  findIds(ids: readonly string[]): Map<string, { queue: string; state: TaskState }> {
    const found = new Map<string, { queue: string; state: TaskState }>();
    for (const id of ids) {
      const row = this.stmt.findId.get(id) as { queue: string; state: TaskState } | undefined;
      if (row) found.set(id, row);
    }
    return found;
  }

  getTask(id: string): TaskRecord | undefined {
    const row = this.stmt.getTask.get(id) as TaskRow | undefined;
    return row && rowToRecord(row);
  }

  apply(queue: string, effects: readonly Effect[]): ReadonlyMap<string, TaskRecord> {
    const activated = new Map<string, TaskRecord>();
    try {
      this.db.write(() => {
        for (const effect of effects) this.applyOne(queue, effect, activated);
      });
    } catch (error) {
      // The write's savepoint was undone, with any queue row it inserted.
      this.knownQueues.delete(queue);
      throw error;
    }
    return activated;
  }

  private applyOne(queue: string, effect: Effect, activated: Map<string, TaskRecord>): void {
    switch (effect.kind) {
      case "insert": {
        this.ensureQueue(queue);
        const { task: t, entry: e } = effect;
        this.stmt.insert.run(t.id, queue, t.type, toBuffer(t.payload), t.contentType,
          Object.keys(t.metadata).length > 0 ? JSON.stringify(t.metadata) : null, e.state, e.priority, e.seq,
          e.maxRetry, effect.createdAtMs, e.readyAtMs, e.timeoutMs, e.deadlineAtMs, e.expiresAtMs, e.uniqueKey,
          e.uniqueUntilMs, e.concurrencyKey, t.group, e.backoffBaseMs, e.backoffMaxMs, t.retentionMs,
          e.rules.length > 0 ? JSON.stringify(e.rules) : "[]");
        return;
      }
      case "transition": {
        const { entry: e, outcome: o } = effect;
        if (e.state === "active" && !o) {
          const row = this.stmt.activate.get(e.leaseId, e.leaseExpiresAtMs, e.attemptEndsAtMs, e.id) as TaskRow | undefined;
          if (row) activated.set(e.id, rowToRecord(row));
        } else if (e.state === "completed" && o?.finishedAtMs !== undefined) {
          this.stmt.complete.run(o.finishedAtMs, o.result ? toBuffer(o.result) : null, o.finishedAtMs, e.id);
        } else {
          this.transition(e, o);
        }
        return;
      }
      case "delete":
        this.stmt.delete.run(effect.id);
        return;
      case "slotLimit": {
        const scope = effect.slot.startsWith("@") ? "" : queue;
        if (effect.limit === undefined) this.stmt.deleteSlotLimit.run(scope, effect.slot);
        else this.stmt.setSlotLimit.run(scope, effect.slot, effect.limit);
        return;
      }
      case "paused":
        this.stmt.setPaused.run({ name: queue, value: effect.paused ? 1 : 0, now: Date.now() });
        return;
      default: {
        const never: never = effect;
        throw new Error(`unknown effect ${JSON.stringify(never)}`);
      }
    }
  }

  private transition(e: TaskIndexEntry, o: TransitionOutcome | undefined): void {
    this.stmt.transition.run({
      id: e.id, state: e.state, seq: e.seq, retried: e.retried, readyAt: e.readyAtMs, leaseId: e.leaseId,
      leaseExpiresAt: e.leaseExpiresAtMs, attemptEndsAt: e.attemptEndsAtMs, expiresAt: e.expiresAtMs, batchId: e.batchId, lastError: o?.lastError ?? null, lastFailedAt: o?.lastFailedAtMs ?? null,
      finishedAt: o?.finishedAtMs ?? null, result: o?.result ? toBuffer(o.result) : null,
      cancelReason: o?.cancelReason ?? null, deadRetention: this.options.deadRetentionMs,
    });
  }

  deleteTask(id: string): boolean {
    return this.db.write(() => this.stmt.delete.run(id).changes > 0);
  }

  /** Stores a per-key concurrency limit (undefined clears it). */
  setKeyLimit(queue: string, limit: number | undefined): void {
    this.db.write(() => this.stmt.setKeyLimit.run({ name: queue, value: limit ?? null, now: Date.now() }));
    this.knownQueues.add(queue);
  }

  /** Stores a queue's rate-limit override (undefined clears it). */
  setRateLimit(queue: string, spec: RateLimitSpec | undefined): void {
    this.db.write(() => this.stmt.setRateLimit.run({ name: queue, rate: spec?.ratePerSec ?? null, burst: spec?.burst ?? null, now: Date.now() }));
    this.knownQueues.add(queue);
  }

  /** Stores a group override (group "" = the queue default); undefined deletes it. */
  setGroupConfig(queue: string, group: string, config: GroupConfig | undefined): boolean {
    return this.db.write(() => {
      if (!config) return this.stmt.deleteGroupConfig.run(queue, group).changes > 0;
      this.ensureQueue(queue);
      this.stmt.setGroupConfig.run({ queue, group, ...config });
      return true;
    });
  }

  /** Records that a queue exists (so ListQueues shows it before it has tasks). */
  ensureQueue(queue: string): void {
    if (this.knownQueues.has(queue)) return;
    this.db.write(() => this.stmt.ensureQueue.run(queue, Date.now()));
    this.knownQueues.add(queue);
  }

  committed(): Promise<void> {
    return this.db.committed();
  }
}

interface GroupConfigRow {
  grp: string;
  max_size: number;
  max_delay_ms: number;
  grace_ms: number;
}

interface SettingsRow {
  paused: number;
  key_limit: number | null;
  rate_per_sec: number | null;
  rate_burst: number | null;
}

interface IndexRow {
  id: string; state: TaskState; type: string; priority: number; seq: number; concurrency_key: string;
  ready_at: number; timeout_ms: number; deadline_at: number; expires_at: number; unique_key: string;
  unique_until: number; retried: number; max_retry: number; backoff_base_ms: number; backoff_max_ms: number;
  lease_id: string; lease_expires_at: number; attempt_ends_at: number; grp: string; batch_id: string; rules: string; payload_bytes: number | null;
}

function indexRowToEntry(r: IndexRow): TaskIndexEntry {
  return {
    id: r.id, state: r.state, type: r.type, priority: r.priority, seq: r.seq, concurrencyKey: r.concurrency_key,
    readyAtMs: r.ready_at, timeoutMs: r.timeout_ms, deadlineAtMs: r.deadline_at, expiresAtMs: r.expires_at,
    uniqueKey: r.unique_key, uniqueUntilMs: r.unique_until, retried: r.retried, maxRetry: r.max_retry,
    backoffBaseMs: r.backoff_base_ms, backoffMaxMs: r.backoff_max_ms, leaseId: r.lease_id,
    leaseExpiresAtMs: r.lease_expires_at, attemptEndsAtMs: r.attempt_ends_at, group: r.grp, batchId: r.batch_id, rules: JSON.parse(r.rules) as TaskRule[],
    payloadBytes: r.payload_bytes ?? 0,
  };
}
