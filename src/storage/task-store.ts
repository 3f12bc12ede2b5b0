/**
 * The grain's durable store (the `QueueStore` port) over SQLite. Every statement is
 * prepared once. Writes run inside the database's group-commit transaction.
 */
import type { Effect } from "../grains/queue/effects.js";
import type { QueueSettings, QueueStore } from "../grains/queue/ports.js";
import type { TaskIndexEntry, TaskRecord, TaskState } from "../grains/queue/task.js";
import type { GroupConfig } from "../grains/queue/group-aggregator.js";
import type { Database } from "./database.js";
import { ATTEMPTS_KEPT_PER_TASK } from "../base/limits.js";
import type { AttemptOutcome, AttemptRecord } from "../grains/queue/attempts.js";
import { activatedRecord, DELIVERY_COLUMNS, rowToRecord, toBuffer, type DeliveryRow, type TaskRow } from "./rows.js";
import { ScheduleStore } from "./schedule-store.js";
import { UnfinishedRows } from "./unfinished-rows.js";
import { WriteGate } from "./write-gate.js";

export interface TaskStoreOptions {
  /** How long archived and cancelled tasks are kept before the janitor deletes them. */
  deadRetentionMs: number;
}

export class TaskStore implements QueueStore {
  private readonly knownQueues = new Set<string>();
  private readonly forgetListeners: Array<(queues: readonly string[]) => void> = [];
  private readonly stmt;
  /** The schedules' statements (their effects are applied in the grain's turn, like the tasks'). */
  readonly schedules: ScheduleStore;
  private readonly unfinished: UnfinishedRows;
  /** Refuses the grains' writes up front while the disk is full (write-gate.ts). */
  private readonly gate: WriteGate;

  constructor(private readonly db: Database, private readonly options: TaskStoreOptions) {
    this.schedules = new ScheduleStore(db);
    this.unfinished = new UnfinishedRows(db.sqlite);
    this.gate = new WriteGate(db.dataDir);
    // A rolled-back transaction may have taken queue rows with it.
    db.onRollback((error) => {
      this.knownQueues.clear();
      this.gate.failed(error);
    });
    const s = db.sqlite;
    this.stmt = {
      /** Params: every column of a new task, in table order up to lease columns. */
      insert: s.prepare(`INSERT INTO tasks (id, queue, type, payload, content_type, metadata, state, priority, seq,
        max_retry, retried, created_at, ready_at, timeout_ms, deadline_at, expires_at, unique_key, unique_until,
        concurrency_key, grp, backoff_base_ms, backoff_max_ms, retention_ms, rules)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      /*
       * One statement per named transition (grains/queue/effects.ts). Each header says
       * what it writes (from the effect) and reads (from the row). Lease columns are
       * lease_id, lease_expires_at and attempt_ends_at; "clears the lease" writes '', 0, 0.
       */
      /**
       * activate (hot): writes state active, the lease, the attempt's start, worker and number, expires_at 0;
       * reads back the delivery's columns the grain's entry does not hold (RETURNING DELIVERY_COLUMNS:
       * the payload, and history such as the last error). RETURNING * cost twice as much (measured
       * in bench/results/2026-12-performance-diary.md, "SQLite cost per task").
       */
      activate: s.prepare(`UPDATE tasks SET state = 'active', lease_id = ?, lease_expires_at = ?, attempt_ends_at = ?,
        attempt_started_at = ?, attempt_worker = ?, attempt_number = ?, expires_at = 0 WHERE id = ? RETURNING ${DELIVERY_COLUMNS}`),
      /**
       * recordAttempt (hot: once per attempt end): inserts the attempt under the number the core
       * carries (the row's attempt_number; no read: a MAX() lookup here cost 4x the insert).
       * OR REPLACE: a number is never reused, but if it were, a settle must not fail for the
       * history. When the number passes ATTEMPTS_KEPT_PER_TASK, pruneAttempts drops the
       * oldest. Never touches the task's row.
       */
      recordAttempt: s.prepare(`INSERT OR REPLACE INTO attempts (task_id, number, started_at, ended_at, worker_id, outcome, error, lease_id, stack)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      attemptEndedUnder: s.prepare("SELECT outcome FROM attempts WHERE task_id = ? AND lease_id = ? AND lease_id != ''"),
      pruneAttempts: s.prepare("DELETE FROM attempts WHERE task_id = ? AND number <= ?"),
      attempts: s.prepare(`SELECT number, started_at, ended_at, worker_id, outcome, error, stack FROM attempts
        WHERE task_id = ? ORDER BY number`),
      /** complete (hot): writes state completed, clears the lease, finished_at, result, purge_at; reads retention_ms. */
      complete: s.prepare(`UPDATE tasks SET state = 'completed', lease_id = '', lease_expires_at = 0, attempt_ends_at = 0, finished_at = ?,
        result = ?, purge_at = ? + retention_ms WHERE id = ?`),
      /** retry: writes state retry, retried, ready_at (end of backoff), batch_id, clears the lease, last_error, last_failed_at. */
      retry: s.prepare(`UPDATE tasks SET state = 'retry', retried = @retried, ready_at = @readyAt, batch_id = @batchId,
        lease_id = '', lease_expires_at = 0, attempt_ends_at = 0, last_error = @lastError, last_failed_at = @lastFailedAt WHERE id = @id`),
      /** requeue: writes state pending (seq kept), retried, batch_id, clears the lease, last_error, last_failed_at. */
      requeue: s.prepare(`UPDATE tasks SET state = 'pending', retried = @retried, batch_id = @batchId,
        lease_id = '', lease_expires_at = 0, attempt_ends_at = 0, last_error = @lastError, last_failed_at = @lastFailedAt WHERE id = @id`),
      /** release: writes state pending (seq and retried kept), batch_id, clears the lease. */
      release: s.prepare(`UPDATE tasks SET state = 'pending', batch_id = @batchId,
        lease_id = '', lease_expires_at = 0, attempt_ends_at = 0 WHERE id = @id`),
      /** promote: writes state pending and its dispatch rank (seq). */
      promote: s.prepare("UPDATE tasks SET state = 'pending', seq = @seq WHERE id = @id"),
      /** fireGroup: writes state pending and the batch's id. */
      fireGroup: s.prepare("UPDATE tasks SET state = 'pending', batch_id = @batchId WHERE id = @id"),
      /**
       * revive: writes state pending, seq, retried 0, ready_at, expires_at 0, batch_id, clears the lease,
       * finished_at 0, purge_at 0 (last_error, result and cancel_reason stay as history).
       */
      revive: s.prepare(`UPDATE tasks SET state = 'pending', seq = @seq, retried = @retried, ready_at = @readyAt, expires_at = @expiresAt,
        batch_id = @batchId, lease_id = '', lease_expires_at = 0, attempt_ends_at = 0, finished_at = 0, purge_at = 0 WHERE id = @id`),
      /**
       * archive: writes state archived, batch_id, clears the lease, last_error, last_failed_at (kept when
       * absent), finished_at, purge_at (finished_at + the node's dead retention).
       */
      archive: s.prepare(`UPDATE tasks SET state = 'archived', batch_id = @batchId, lease_id = '', lease_expires_at = 0, attempt_ends_at = 0,
        last_error = @lastError, last_failed_at = COALESCE(@lastFailedAt, last_failed_at), finished_at = @finishedAt,
        purge_at = @finishedAt + @deadRetention WHERE id = @id`),
      /** cancel: writes state cancelled, batch_id, clears the lease, finished_at, cancel_reason, purge_at (finished_at + dead retention). */
      cancel: s.prepare(`UPDATE tasks SET state = 'cancelled', batch_id = @batchId, lease_id = '', lease_expires_at = 0, attempt_ends_at = 0,
        finished_at = @finishedAt, cancel_reason = @cancelReason, purge_at = @finishedAt + @deadRetention WHERE id = @id`),
      /** delete: removes the row. */
      delete: s.prepare("DELETE FROM tasks WHERE id = ?"),
      /** Creates the queue's row if it has none (created_at from the effect). */
      ensureQueue: s.prepare("INSERT OR IGNORE INTO queues (name, paused, created_at) VALUES (?, 0, ?)"),
      /** setPaused: writes queues.paused (creating the row at @now if needed). */
      setPaused: s.prepare(`INSERT INTO queues (name, paused, created_at) VALUES (@name, @value, @now)
        ON CONFLICT (name) DO UPDATE SET paused = @value`),
      /** setKeyLimit: writes queues.key_limit (NULL: none). */
      setKeyLimit: s.prepare(`INSERT INTO queues (name, key_limit, created_at) VALUES (@name, @value, @now)
        ON CONFLICT (name) DO UPDATE SET key_limit = @value`),
      /** setRateLimit: writes queues.rate_per_sec and rate_burst (NULL: the server default). */
      setRateLimit: s.prepare(`INSERT INTO queues (name, rate_per_sec, rate_burst, created_at) VALUES (@name, @rate, @burst, @now)
        ON CONFLICT (name) DO UPDATE SET rate_per_sec = @rate, rate_burst = @burst`),
      /** deleteQueue: removes the queue's row (paused, key limit, rate limit). */
      deleteQueue: s.prepare("DELETE FROM queues WHERE name = ?"),
      /**
       * deleteQueue: drops the queue's emptied count rows (its tasks were deleted before, so
       * a row still above 0 is a task enqueued since: it stays counted).
       */
      deleteQueueCounts: s.prepare("DELETE FROM queue_counts WHERE queue = ? AND n = 0"),
      /** clearSlotLimits: removes the dynamic limits of the queue's own rule keys (scope = the queue). */
      clearSlotLimits: s.prepare("DELETE FROM slot_limits WHERE scope = ?"),
      /** A queue exists when it has a row or any task (index lookups on both). */
      queueExists: s.prepare(`SELECT 1 FROM queues WHERE name = ? UNION ALL SELECT 1 FROM tasks WHERE queue = ?
        UNION ALL SELECT 1 FROM schedules WHERE queue = ? LIMIT 1`),
      hasTasks: s.prepare("SELECT 1 FROM tasks WHERE queue = ? LIMIT 1"),
      /** A bulk action's batch: the (queue, state) index in row order, no payload read. */
      pageOfState: s.prepare(`SELECT rowid, id, length(payload) AS bytes FROM tasks WHERE queue = ? AND state = ? AND rowid > ?
        ORDER BY rowid LIMIT ?`),
      settings: s.prepare("SELECT paused, key_limit, rate_per_sec, rate_burst FROM queues WHERE name = ?"),
      getTask: s.prepare("SELECT * FROM tasks WHERE id = ?"),
      findId: s.prepare("SELECT queue, state FROM tasks WHERE id = ?"),
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

  /** Streams the rows (never all of them at once: a backlog of millions would be gigabytes of row objects). */
  loadUnfinished(queue: string): Iterable<TaskIndexEntry> {
    return this.unfinished.of(queue);
  }

  loadSettings(queue: string): QueueSettings {
    const row = this.stmt.settings.get(queue) as SettingsRow | undefined;
    const groupConfigs = new Map<string, GroupConfig>();
    for (const g of this.stmt.groupConfigs.all(queue) as GroupConfigRow[]) {
      groupConfigs.set(g.grp, { maxSize: g.max_size, maxDelayMs: g.max_delay_ms, graceMs: g.grace_ms });
    }
    const slotLimits = this.slotLimits(queue);
    const schedules = this.schedules.load(queue);
    if (!row) return { paused: false, groupConfigs, slotLimits, schedules };
    return {
      paused: row.paused === 1,
      groupConfigs,
      slotLimits,
      schedules,
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

  /**
   * The rows of `queues` were deleted or replaced outside the grains (a partition dropped
   * to be rebuilt, caught up with its changelog, or loaded by a handoff): a later insert
   * must create each queue's row again, and whatever was built on the old rows is stale,
   * so the listeners (the node's grains) drop it too.
   */
  forgetQueues(queues: Iterable<string>): void {
    const list = [...queues];
    for (const queue of list) this.knownQueues.delete(queue);
    for (const listener of this.forgetListeners) listener(list);
  }

  /** Called by forgetQueues with the queues whose rows were replaced outside the grains. */
  onForget(listener: (queues: readonly string[]) => void): void {
    this.forgetListeners.push(listener);
  }

  writeRefusal(): Error | undefined {
    return this.gate.refusal();
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
      this.gate.failed(error);
      throw error;
    }
    return activated;
  }

  /** Runs the one statement named by the effect. */
  private applyOne(queue: string, effect: Effect, activated: Map<string, TaskRecord>): void {
    switch (effect.kind) {
      case "insert": {
        const { task: t, entry: e } = effect;
        this.ensureQueue(queue, effect.createdAtMs);
        this.stmt.insert.run(t.id, queue, t.type, toBuffer(t.payload), t.contentType,
          Object.keys(t.metadata).length > 0 ? JSON.stringify(t.metadata) : null, e.state, e.priority, e.seq,
          e.maxRetry, effect.createdAtMs, e.readyAtMs, e.timeoutMs, e.deadlineAtMs, e.expiresAtMs, e.uniqueKey,
          e.uniqueUntilMs, e.concurrencyKey, t.group, e.backoffBaseMs, e.backoffMaxMs, t.retentionMs,
          e.rules.length > 0 ? JSON.stringify(e.rules) : "[]");
        return;
      }
      case "activate": {
        const e = effect.entry;
        const row = this.stmt.activate.get(e.leaseId, e.leaseExpiresAtMs, e.attemptEndsAtMs, e.attemptStartedAtMs, e.attemptWorker,
          e.attemptNumber, e.id) as DeliveryRow | undefined;
        if (row) activated.set(e.id, activatedRecord(queue, e, row));
        return;
      }
      case "complete": {
        const o = effect.outcome;
        this.stmt.complete.run(o.finishedAtMs, toBuffer(o.result), o.finishedAtMs, effect.entry.id);
        return;
      }
      case "retry": {
        const { entry: e, outcome: o } = effect;
        this.stmt.retry.run({ id: e.id, retried: e.retried, readyAt: e.readyAtMs, batchId: e.batchId, lastError: o.lastError, lastFailedAt: o.lastFailedAtMs });
        return;
      }
      case "requeue": {
        const { entry: e, outcome: o } = effect;
        this.stmt.requeue.run({ id: e.id, retried: e.retried, batchId: e.batchId, lastError: o.lastError, lastFailedAt: o.lastFailedAtMs });
        return;
      }
      case "recordAttempt": {
        const { taskId, number } = effect;
        this.stmt.recordAttempt.run(taskId, number, effect.startedAtMs, effect.endedAtMs, effect.workerId, effect.outcome, effect.error, effect.leaseId, effect.stack ?? "");
        if (number > ATTEMPTS_KEPT_PER_TASK) this.stmt.pruneAttempts.run(taskId, number - ATTEMPTS_KEPT_PER_TASK);
        return;
      }
      case "release":
        this.stmt.release.run({ id: effect.entry.id, batchId: effect.entry.batchId });
        return;
      case "promote":
        this.stmt.promote.run({ id: effect.entry.id, seq: effect.entry.seq });
        return;
      case "fireGroup":
        this.stmt.fireGroup.run({ id: effect.entry.id, batchId: effect.entry.batchId });
        return;
      case "revive": {
        const e = effect.entry;
        this.stmt.revive.run({ id: e.id, seq: e.seq, retried: e.retried, readyAt: e.readyAtMs, expiresAt: e.expiresAtMs, batchId: e.batchId });
        return;
      }
      case "archive": {
        const { entry: e, outcome: o } = effect;
        this.stmt.archive.run({ id: e.id, batchId: e.batchId, lastError: o.lastError, lastFailedAt: o.lastFailedAtMs ?? null,
          finishedAt: o.finishedAtMs, deadRetention: this.options.deadRetentionMs });
        return;
      }
      case "cancel": {
        const { entry: e, outcome: o } = effect;
        this.stmt.cancel.run({ id: e.id, batchId: e.batchId, finishedAt: o.finishedAtMs, cancelReason: o.cancelReason,
          deadRetention: this.options.deadRetentionMs });
        return;
      }
      case "delete":
        this.stmt.delete.run(effect.id);
        return;
      case "setPaused":
        this.stmt.setPaused.run({ name: queue, value: effect.paused ? 1 : 0, now: effect.atMs });
        this.knownQueues.add(queue);
        return;
      case "setKeyLimit":
        this.stmt.setKeyLimit.run({ name: queue, value: effect.limit ?? null, now: effect.atMs });
        this.knownQueues.add(queue);
        return;
      case "setRateLimit":
        this.stmt.setRateLimit.run({ name: queue, rate: effect.spec?.ratePerSec ?? null, burst: effect.spec?.burst ?? null, now: effect.atMs });
        this.knownQueues.add(queue);
        return;
      case "setGroupConfig":
        this.ensureQueue(queue, effect.atMs);
        this.stmt.setGroupConfig.run({ queue, group: effect.group, ...effect.config });
        return;
      case "deleteGroupConfig":
        this.stmt.deleteGroupConfig.run(queue, effect.group);
        return;
      case "clearSlotLimits":
        this.stmt.clearSlotLimits.run(queue);
        return;
      case "deleteQueue":
        this.stmt.deleteQueue.run(queue);
        this.stmt.deleteQueueCounts.run(queue);
        // A later insert must create the row again.
        this.knownQueues.delete(queue);
        return;
      case "setSlotLimit": {
        const scope = effect.slot.startsWith("@") ? "" : queue;
        if (effect.limit === undefined) this.stmt.deleteSlotLimit.run(scope, effect.slot);
        else this.stmt.setSlotLimit.run(scope, effect.slot, effect.limit);
        return;
      }
      case "setSchedule":
        this.ensureQueue(queue, effect.schedule.updatedAtMs);
        this.schedules.apply(queue, effect);
        return;
      case "deleteSchedule":
      case "tickSchedule":
        this.schedules.apply(queue, effect);
        return;
      default: {
        const never: never = effect;
        throw new Error(`unknown effect ${JSON.stringify(never)}`);
      }
    }
  }

  /** A task's attempts, oldest first (its last ATTEMPTS_KEPT_PER_TASK). */
  attemptsOf(taskId: string): AttemptRecord[] {
    type Row = { number: number; started_at: number; ended_at: number; worker_id: string; outcome: AttemptOutcome; error: string; stack: string };
    return (this.stmt.attempts.all(taskId) as Row[]).map((r) => ({
      number: r.number, startedAtMs: r.started_at, endedAtMs: r.ended_at, workerId: r.worker_id, outcome: r.outcome, error: r.error, stack: r.stack,
    }));
  }

  /** How the attempt of `taskId` that ended under `leaseId` ended; undefined if none did (kept attempts only). */
  attemptEndedUnder(taskId: string, leaseId: string): AttemptOutcome | undefined {
    const row = this.stmt.attemptEndedUnder.get(taskId, leaseId) as { outcome: AttemptOutcome } | undefined;
    return row?.outcome;
  }

  queueExists(queue: string): boolean {
    return this.stmt.queueExists.get(queue, queue, queue) !== undefined;
  }

  hasTasks(queue: string): boolean {
    return this.stmt.hasTasks.get(queue) !== undefined;
  }

  pageOfState(queue: string, state: TaskState, afterRowid: number, limit: number): Array<{ rowid: number; id: string; payloadBytes: number }> {
    const rows = this.stmt.pageOfState.all(queue, state, afterRowid, limit) as Array<{ rowid: number; id: string; bytes: number | null }>;
    return rows.map((r) => ({ rowid: r.rowid, id: r.id, payloadBytes: r.bytes ?? 0 }));
  }

  /** Records that a queue exists (so ListQueues shows it before it has tasks). */
  private ensureQueue(queue: string, atMs: number): void {
    if (this.knownQueues.has(queue)) return;
    this.stmt.ensureQueue.run(queue, atMs);
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
