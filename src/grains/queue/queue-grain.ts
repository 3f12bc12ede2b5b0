/**
 * The queue grain's shell: runs one operation of the pure core per call, persists the
 * core's effects through the `QueueStore` port in the same turn, reports events,
 * wakes parked lease calls when work appears, and keeps one timer armed at the core's
 * next deadline.
 *
 * Every method is synchronous: the core decides, the store writes into the open
 * group-commit transaction, and callers reach the grain through a `QueueRef`, which
 * resolves only after that transaction commits.
 * Two calls can therefore never interleave inside a grain; the event loop is the
 * grain's mailbox.
 */
import type { Clock } from "../../base/clock.js";
import { ConveyorError, grainDeactivated, queueNotFound, taskNotFound } from "../../base/errors.js";
import { BULK_ACTION_BATCH_MAX_TASKS, WORK_SLICE_BYTES, quote } from "../../base/limits.js";
import type { BulkAction, FinishedBatch } from "./bulk-actions.js";
import type { CoreEvent, Effect } from "./effects.js";
import type {
  DeliveryPlan, EnqueueOutcome, GroupStatus, LeaseStatusView, QueueCore, ScheduleAnswer, ScheduleCommand, Settlement,
} from "./queue-core.js";
import { runNowTaskId } from "./schedule.js";
import type { GroupConfig } from "./group-aggregator.js";
import { NO_BATCHES, type LeaseCaps } from "./ready-queues.js";
import type { QueueStore } from "./ports.js";
import type { CancelReason, NewTask, TaskRecord, TaskState } from "./task.js";
import type { RateLimitSpec } from "./token-bucket.js";

/** A delivery with its task rows, ready to send to a worker. */
export interface LeasedDelivery extends DeliveryPlan {
  queue: string;
  tasks: TaskRecord[];
}

export interface GrainHooks {
  /** Something may have become dispatchable. Called after the turn's writes. */
  onReady(queue: string): void;
  onEvents(queue: string, events: readonly CoreEvent[]): void;
  /**
   * Tasks of this turn that reached a final state or were deleted (their rows are
   * written, not yet committed): what waiters on a task's end listen to.
   */
  onTasksEnded?(queue: string, taskIds: readonly string[]): void;
  /** The turn's effects were written, at `nowMs` (metrics: wait and run times, retries). */
  onApplied?(queue: string, effects: readonly Effect[], nowMs: number): void;
  /** A storage write failed: memory no longer matches disk and the grain must go. */
  onFailure(queue: string, error: unknown): void;
  /** A call was refused before its turn because storage refuses writes now (a full disk); the grain is unchanged. */
  onRefused?(queue: string, error: Error): void;
}

export type TaskAction = "cancel" | "delete" | "run" | "archive" | "retry";

/** How soon a timer turn refused by storage (a full disk) is tried again. */
const REFUSED_TIMER_RETRY_MS = 1_000;

const EMPTY_KNOWN = new Map<string, never>();
const EMPTY_ROWS: ReadonlyMap<string, TaskRecord> = new Map();

export class QueueGrain {
  /** Last time a call reached this grain (for idle passivation). */
  lastUsedMs: number;
  private timerAtMs: number | undefined;
  private cancelTimer: (() => void) | undefined;
  private active = true;
  /** Rows of the tasks the last turn made active. */
  private activated: ReadonlyMap<string, TaskRecord> = new Map();

  constructor(
    readonly queue: string,
    private readonly core: QueueCore,
    private readonly store: QueueStore,
    private readonly clock: Clock,
    private readonly hooks: GrainHooks,
  ) {
    this.lastUsedMs = clock.nowMs();
  }

  /**
   * Rebuilds the core from storage and arms its timer. While storage refuses writes, the
   * first tick (which may write) waits for the timer's retry: the loaded memory matches disk.
   */
  activate(): void {
    const nowMs = this.clock.nowMs();
    this.core.load(this.store.loadUnfinished(this.queue), this.store.loadSettings(this.queue), nowMs);
    if (this.store.writeRefusal()) {
      this.armRetry();
      return;
    }
    this.core.tick(nowMs);
    this.fireSchedules(nowMs);
    this.afterTurn();
  }

  enqueue(tasks: readonly NewTask[], atomic: boolean): EnqueueOutcome[] {
    return this.turn(() => {
      const chosen = tasks.filter((t) => t.idChosen && !this.core.has(t.id)).map((t) => t.id);
      const known = chosen.length > 0 ? this.store.findIds(chosen) : EMPTY_KNOWN;
      return this.core.enqueue(tasks, known, this.clock.nowMs(), atomic);
    });
  }

  /** See QueueCore.lease: up to `max` deliveries, stopping once they hold `maxBytes` of payload; `workerId` is the caller's. */
  lease(max: number, caps: LeaseCaps = NO_BATCHES, maxBytes = Infinity, workerId = ""): LeasedDelivery[] {
    // Nothing to hand out needs no write: a call on an idle queue parks even on a full disk.
    const refusal = this.store.writeRefusal();
    if (refusal) return this.core.pruneAndHasDispatchable(this.clock.nowMs(), caps) ? this.refuse(refusal) : [];
    const plans = this.turn(() => this.core.lease(max, this.clock.nowMs(), caps, maxBytes, workerId), "unchecked");
    return plans.map((plan) => ({
      ...plan, queue: this.queue, tasks: plan.taskIds.map((id) => this.activated.get(id) ?? this.mustGet(id)),
    }));
  }

  /**
   * Not refused on a full disk: a heartbeat writes nothing unless it finds an attempt
   * over (rare), and refusing it would let running tasks' leases lapse.
   */
  heartbeat(leaseIds: readonly string[]): LeaseStatusView[] {
    return this.turn(() => this.core.heartbeat(leaseIds, this.clock.nowMs()), "unchecked");
  }

  settle(items: readonly Settlement[]): (ConveyorError | null)[] {
    return this.turn(() => this.core.settle(items, this.clock.nowMs()));
  }

  /** Operator and producer actions on one task of this queue. */
  act(id: string, action: TaskAction, reason: CancelReason = "OPERATOR"): ConveyorError | null {
    return this.turn(() => {
      const nowMs = this.clock.nowMs();
      if (action === "retry") {
        if (this.core.has(id)) return this.finishedOnly(id);
        const record = this.store.getTask(id);
        return record && record.queue === this.queue ? this.core.revive(record, nowMs) : taskNotFound(id);
      }
      if (!this.core.has(id)) return this.actOnFinished(id, action);
      switch (action) {
        case "cancel": return this.core.cancel(id, reason, nowMs);
        case "delete": return this.core.delete(id);
        case "run": return this.core.runNow(id);
        case "archive": return this.core.archive(id, nowMs);
      }
    });
  }

  /*
   * Bulk actions run in batches, one turn each (the runtime's bulk runner drives them and
   * awaits each commit, so leases and enqueues interleave). A batch re-checks every
   * task's state in its own turn: a task that moved on since it was picked is skipped.
   */

  /** Ids of this queue's unfinished tasks in `state` now (a read: the snapshot a bulk action works through). */
  idsInState(state: TaskState): string[] {
    return this.core.idsInState(state);
  }

  /** One batch of cancel, archive or delete over unfinished tasks still in `state`; how many it changed. */
  bulkUnfinished(action: Exclude<BulkAction, "retry">, state: TaskState, ids: readonly string[]): number {
    return this.turn(() => {
      const nowMs = this.clock.nowMs();
      let affected = 0;
      for (const id of ids) {
        if (this.core.stateOf(id) !== state) continue;
        const error = action === "cancel" ? this.core.cancel(id, "OPERATOR", nowMs)
          : action === "archive" ? this.core.archive(id, nowMs) : this.core.delete(id);
        if (!error) affected += 1;
      }
      return affected;
    });
  }

  /**
   * One batch of retry or delete over finished tasks in `state` after row `afterRowid`:
   * at most BULK_ACTION_BATCH_MAX_TASKS, and a retry batch stops at WORK_SLICE_BYTES of
   * payload (reviving rewrites the row). A retry refused (a unique key now held) is skipped.
   */
  bulkFinished(action: "retry" | "delete", state: TaskState, afterRowid: number): FinishedBatch {
    return this.turn(() => {
      const rows = this.store.pageOfState(this.queue, state, afterRowid, BULK_ACTION_BATCH_MAX_TASKS);
      const nowMs = this.clock.nowMs();
      let affected = 0;
      let bytes = 0;
      let lastRowid = afterRowid;
      for (const row of rows) {
        if (action === "retry" && bytes >= WORK_SLICE_BYTES) return { affected, lastRowid, more: true };
        lastRowid = row.rowid;
        if (action === "delete") {
          this.core.deleteFinished(row.id);
          affected += 1;
          continue;
        }
        bytes += row.payloadBytes;
        const record = this.store.getTask(row.id);
        if (record && !this.core.revive(record, nowMs)) affected += 1;
      }
      return { affected, lastRowid, more: rows.length === BULK_ACTION_BATCH_MAX_TASKS };
    });
  }

  /** True when any task row (finished ones included) names this queue. */
  hasTasks(): boolean {
    return this.store.hasTasks(this.queue);
  }

  private actOnFinished(id: string, action: Exclude<TaskAction, "retry">): ConveyorError | null {
    const record = this.store.getTask(id);
    if (!record || record.queue !== this.queue) return taskNotFound(id);
    if (action === "delete") {
      this.core.deleteFinished(id);
      return null;
    }
    return new ConveyorError("FAILED_PRECONDITION", "TASK_STATE_CONFLICT",
      `cannot ${action} task ${quote(id)}: it is already ${record.state}`);
  }

  private finishedOnly(id: string): ConveyorError {
    return new ConveyorError("FAILED_PRECONDITION", "TASK_STATE_CONFLICT",
      `cannot retry task ${quote(id)}: it has not finished (only archived or cancelled tasks can be retried)`);
  }

  /* Queue settings: the grain is their only writer; each persists through the turn. */

  /**
   * Pauses or resumes the queue, which need not exist yet: a pause ahead of the first task
   * creates its settings row and holds for tasks enqueued later. Resuming a queue that has
   * no row writes nothing (it is not paused), so it leaves no stray queue behind.
   */
  setPaused(paused: boolean): void {
    if (!paused && !this.store.queueExists(this.queue)) return;
    this.turn(() => this.core.setPaused(paused, this.clock.nowMs()));
  }

  /**
   * Whether the queue could be removed now; its refusal (unfinished tasks) otherwise.
   * NOT_FOUND when the queue does not exist.
   */
  removalRefusal(): ConveyorError | null {
    if (!this.store.queueExists(this.queue)) return queueNotFound(this.queue);
    return this.core.removalRefusal();
  }

  /**
   * The last turn of removing the queue: its settings go (refused while it holds
   * unfinished tasks). Its finished tasks must have been deleted before (bulk batches);
   * the caller deactivates the grain after this turn.
   */
  removeSettings(): void {
    this.turn(() => {
      const error = this.core.remove();
      if (error) throw error;
    });
  }

  setKeyLimit(limit: number | undefined): void {
    this.turn(() => this.core.setKeyLimit(limit, this.clock.nowMs()));
  }

  setRateLimit(spec: RateLimitSpec | undefined): void {
    this.turn(() => this.core.setRateLimit(spec, this.clock.nowMs()));
  }

  /** Payload sizes of unfinished tasks (0 for others): what settling them rewrites. */
  payloadBytesOf(taskIds: readonly string[]): number[] {
    return taskIds.map((id) => this.core.payloadBytesOf(id));
  }

  /** False while storage refuses writes: a delivery could not be stored. */
  hasDispatchable(caps: LeaseCaps = NO_BATCHES): boolean {
    if (this.store.writeRefusal()) return false;
    return this.core.pruneAndHasDispatchable(this.clock.nowMs(), caps);
  }

  /** Sets or (undefined) deletes a group override; false when there was none to delete. */
  setGroupConfig(group: string, config: GroupConfig | undefined): boolean {
    return this.turn(() => this.core.setGroupConfig(group, config, this.clock.nowMs()));
  }

  /** An operator's command on one of the queue's schedules; throws its error (not found, full). */
  schedule(cmd: ScheduleCommand): ScheduleAnswer {
    const answer = this.turn(() => {
      const nowMs = this.clock.nowMs();
      const known = cmd.kind === "runNow" ? this.store.findIds([runNowTaskId(cmd.name, nowMs)]) : EMPTY_KNOWN;
      return this.core.schedule(cmd, nowMs, known);
    });
    if (answer instanceof ConveyorError) throw answer;
    return answer;
  }

  /** Enqueues the schedules' due ticks; a tick whose task already exists (finished) is found first. */
  private fireSchedules(nowMs: number): void {
    const ids = this.core.dueScheduleTaskIds(nowMs);
    this.core.fireSchedules(nowMs, ids.length > 0 ? this.store.findIds(ids) : EMPTY_KNOWN);
  }

  /** A shared slot freed elsewhere on the node. */
  wakeSlot(slot: string): void {
    this.turn(() => this.core.wakeSlot(slot));
  }

  listGroups(): GroupStatus[] {
    return this.core.listGroups();
  }

  get paused(): boolean {
    return this.core.paused;
  }

  stats() {
    return { ...this.core.stats(), keyLimit: this.core.keyLimit, rateLimit: this.core.rateLimit };
  }

  /** When the grain next needs to run on its own (a reminder for passivation). */
  nextWakeAtMs(): number | undefined {
    return this.core.nextWakeAtMs();
  }

  /** Stops the grain's timer; the instance must not be used afterwards. */
  deactivate(): void {
    if (this.active) this.core.dispose();
    this.active = false;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  /**
   * Runs one turn. Unless the caller checked already ("unchecked": it decided the turn
   * may run), a turn is refused before it decides anything while storage refuses
   * writes, so the grain's memory stays what disk holds.
   */
  private turn<T>(decide: () => T, storage: "check" | "unchecked" = "check"): T {
    if (!this.active) throw grainDeactivated(this.queue);
    this.lastUsedMs = this.clock.nowMs();
    if (storage === "check") {
      const refusal = this.store.writeRefusal();
      if (refusal) this.refuse(refusal);
    }
    const result = decide();
    this.afterTurn();
    return result;
  }

  private afterTurn(): void {
    const { effects, events, readyChanged } = this.core.drain();
    this.activated = EMPTY_ROWS;
    if (effects.length > 0) {
      try {
        this.activated = this.store.apply(this.queue, effects);
      } catch (error) {
        // Only this turn's writes were undone (the store's savepoint); the grain's memory
        // ran ahead of them, so the grain goes and the next call rebuilds it from disk.
        this.hooks.onFailure(this.queue, error);
        // The store classifies storage failures (disk full, refused value, retryable).
        if (error instanceof ConveyorError) throw error;
        throw new ConveyorError("UNAVAILABLE", "STORAGE_FAILURE", `storage write failed for queue ${this.queue}; retry`, undefined, { cause: error });
      }
      this.hooks.onApplied?.(this.queue, effects, this.clock.nowMs());
    }
    if (events.length > 0) this.hooks.onEvents(this.queue, events);
    if (this.hooks.onTasksEnded) {
      const ended = endedTaskIds(effects);
      if (ended.length > 0) this.hooks.onTasksEnded(this.queue, ended);
    }
    if (readyChanged) this.hooks.onReady(this.queue);
    this.armTimer();
  }

  private refuse(refusal: Error): never {
    this.hooks.onRefused?.(this.queue, refusal);
    throw refusal;
  }

  /** Runs the timer's turn again soon (storage refused it; its deadlines are still due). */
  private armRetry(): void {
    this.cancelTimer?.();
    this.timerAtMs = this.clock.nowMs() + REFUSED_TIMER_RETRY_MS;
    this.cancelTimer = this.clock.setTimer(REFUSED_TIMER_RETRY_MS, () => this.onTimer());
  }

  private armTimer(): void {
    const atMs = this.core.nextWakeAtMs();
    if (atMs === this.timerAtMs) return;
    this.cancelTimer?.();
    this.timerAtMs = atMs;
    this.cancelTimer = atMs === undefined ? undefined : this.clock.setTimer(atMs - this.clock.nowMs(), () => this.onTimer());
  }

  private onTimer(): void {
    this.timerAtMs = undefined;
    this.cancelTimer = undefined;
    if (!this.active) return;
    if (this.store.writeRefusal()) {
      this.armRetry();
      return;
    }
    try {
      this.turn(() => {
        const nowMs = this.clock.nowMs();
        this.core.tick(nowMs);
        this.fireSchedules(nowMs);
      }, "unchecked");
    } catch {
      // onFailure has already deactivated the grain; the next call rebuilds it.
    }
  }

  private mustGet(id: string): TaskRecord {
    const record = this.store.getTask(id);
    if (!record) throw new Error(`leased task ${id} of queue ${this.queue} has no row`);
    return record;
  }
}

/** The tasks an effect list finishes or deletes. */
function endedTaskIds(effects: readonly Effect[]): string[] {
  const ids: string[] = [];
  for (const e of effects) {
    if (e.kind === "complete" || e.kind === "archive" || e.kind === "cancel") ids.push(e.entry.id);
    else if (e.kind === "delete") ids.push(e.id);
  }
  return ids;
}
