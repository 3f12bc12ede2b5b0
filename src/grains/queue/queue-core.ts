/**
 * The queue grain's pure core: every dispatch decision for one queue.
 *
 * Design: the core is synchronous and deterministic. It reads no clock (every call gets
 * `nowMs`), draws randomness only from the injected `Random`, and performs no IO:
 * each operation mutates the in-memory index and appends `Effect`s that the shell
 * (queue-grain.ts) persists in the same event-loop turn, in one transaction. Because
 * the index holds only unfinished tasks and is rebuilt from storage by `load`, it is
 * disposable: passivation, a restart or a relocation lose nothing.
 *
 * This file is the orchestrator: it builds the parts, routes each call to the part that
 * owns it, and keeps the one decision that spans them all in one place — the dispatch
 * rule in `lease`. The parts share `CoreMemory` (the index, the dispatch order, the due
 * timers, the leases, the ranks and the turn's output) and each holds one invariant:
 * - `RuleMembership` (rule-membership.ts): which slots a task counts against; strategies;
 * - `FiredGroups` (fired-groups.ts): aggregating groups, when they fire, fired batches;
 * - `UniqueKeys` (unique-keys.ts): unique keys held by unfinished tasks;
 * - `WaitingTasks` (waiting-tasks.ts): where a waiting task sits (group, ready, timers);
 * - `TaskExits` (task-exits.ts): the one unlink path, failed attempts, finishing;
 * - `LeaseLifecycle` (lease-lifecycle.ts): opening, heartbeats, settlements, lease ends;
 * - `QueueSettings` (queue-settings.ts): paused, key limit, rate limit;
 * - `OperatorActions` (operator-actions.ts): cancel, run now, archive, delete, revive;
 * - `Admission` (admission.ts): which enqueued items may enter, and entering them;
 * - `Schedules` (schedules.ts): periodic tasks, each tick enqueued at most once.
 * - `QueueRemoval` (queue-removal.ts): forgetting the settings of a queue with no unfinished task.
 */
import type { ConveyorError } from "../../base/errors.js";
import { Admission, type EnqueueOutcome, type KnownIds } from "./admission.js";
import { CoreMemory, type CoreConfig, type CoreDeps, type TurnOutput } from "./core-memory.js";
import { WAITING, type DueItem } from "./due-timers.js";
import { FiredGroups, type GroupStatus } from "./fired-groups.js";
import type { GroupConfig } from "./group-aggregator.js";
import { QUEUE_RULE, slotOf } from "./key-slots.js";
import { LeaseLifecycle, type DeliveryPlan, type LeaseStatusView, type Settlement } from "./lease-lifecycle.js";
import { OperatorActions } from "./operator-actions.js";
import { QueueRemoval } from "./queue-removal.js";
import { QueueSettings } from "./queue-settings.js";
import { snapshotOf, statsOf, type CoreStats } from "./queue-views.js";
import { NO_BATCHES, type LeaseCaps } from "./ready-queues.js";
import { RuleMembership } from "./rule-membership.js";
import type { CronCalendar, ScheduleState } from "./schedule.js";
import { Schedules, type ScheduleAnswer, type ScheduleCommand } from "./schedules.js";
import { TaskExits, isOverdue } from "./task-exits.js";
import type { CancelReason, NewTask, TaskIndexEntry, TaskRecord, TaskState } from "./task.js";
import type { RateLimitSpec } from "./token-bucket.js";
import { UniqueKeys } from "./unique-keys.js";
import { WaitingTasks } from "./waiting-tasks.js";

export type { CoreConfig, CoreDeps } from "./core-memory.js";
export type { EnqueueOutcome, KnownIds } from "./admission.js";
export type { GroupStatus } from "./fired-groups.js";
export type { DeliveryPlan, LeaseStatusView, Settlement } from "./lease-lifecycle.js";
export type { ScheduleAnswer, ScheduleCommand } from "./schedules.js";

/** The calendar of a core built without one: cron schedules are validated by the server, so reaching this is a bug. */
const NO_CRON: CronCalendar = {
  next: () => { throw new Error("no cron calendar"); },
  prev: () => { throw new Error("no cron calendar"); },
};

export interface LoadOptions {
  paused: boolean;
  /** Durable dynamic limits of this queue's rule keys. */
  slotLimits?: ReadonlyMap<string, number>;
  keyLimit?: number;
  rateLimit?: RateLimitSpec;
  /** Group overrides by group name ("" = the queue default). */
  groupConfigs?: ReadonlyMap<string, GroupConfig>;
  schedules?: readonly ScheduleState[];
}

export class QueueCore {
  private readonly memory: CoreMemory;
  private readonly rules: RuleMembership;
  private readonly groups: FiredGroups;
  private readonly unique: UniqueKeys;
  private readonly waiting: WaitingTasks;
  private readonly exits: TaskExits;
  private readonly leases: LeaseLifecycle;
  private readonly settings: QueueSettings;
  private readonly operator: OperatorActions;
  private readonly admission: Admission;
  private readonly schedules: Schedules;
  private readonly removal: QueueRemoval;

  constructor(
    readonly queue: string,
    config: CoreConfig,
    deps: CoreDeps,
  ) {
    // Built in dependency order: each part sees only the memory and the parts before it.
    const memory = (this.memory = new CoreMemory(queue, config, deps));
    const rules = (this.rules = new RuleMembership(memory));
    const groups = (this.groups = new FiredGroups(memory));
    const unique = (this.unique = new UniqueKeys((id) => memory.entries.has(id)));
    const waiting = (this.waiting = new WaitingTasks(memory, groups));
    const exits = (this.exits = new TaskExits(memory, groups, rules, unique, waiting));
    this.leases = new LeaseLifecycle(memory, rules, waiting, exits);
    this.settings = new QueueSettings(memory, rules);
    this.operator = new OperatorActions(memory, rules, unique, waiting, exits);
    this.admission = new Admission(memory, groups, rules, unique, waiting, exits);
    this.schedules = new Schedules(memory, this.admission, deps.cron ?? NO_CRON);
    this.removal = new QueueRemoval(memory, groups, this.schedules);
  }

  // ---- activation -------------------------------------------------------------------

  /**
   * Rebuilds the index from durable rows (active leases: see `LeaseLifecycle.adoptLoaded`).
   * `rows` is read once, in order: the store streams them, so a large backlog is never
   * held as rows and entries at once (plain pending ones are packed as they come).
   */
  load(rows: Iterable<TaskIndexEntry>, options: LoadOptions, nowMs: number): void {
    const { entries, ranks } = this.memory;
    this.settings.restore(options.paused, options.keyLimit, options.rateLimit, nowMs);
    for (const [group, config] of options.groupConfigs ?? []) this.groups.restoreConfig(group, config);
    // Dynamic limits are durable (a key's newest task may have finished already).
    for (const [slot, limit] of options.slotLimits ?? []) this.rules.slots.setSlotLimit(slot, limit);
    for (const row of rows) {
      ranks.observeLoaded(row);
      if (row.uniqueKey && (row.uniqueUntilMs === 0 || row.uniqueUntilMs > nowMs)) this.unique.hold(row.uniqueKey, row.id, row.uniqueUntilMs);
      // A plain pending row goes straight into the packed columns: no entry object is made for it.
      if (this.memory.waitPackedLoaded(row)) {
        this.waiting.armExpiry(row);
        continue;
      }
      const e = { ...row };
      entries.set(e);
      this.rules.join(e);
      if (e.state === "active") this.leases.adoptLoaded(e, nowMs);
      else this.waiting.schedule(e, nowMs);
    }
    // New keys join the round being served: the oldest waiting task's rank.
    let oldest = Infinity;
    // Packed tasks have no rules, so only the objects can be round-robin tasks.
    for (const e of entries.objects()) if (e.state === "pending" && e.rules.length > 0) oldest = Math.min(oldest, e.seq);
    ranks.startServingAt(oldest === Infinity ? undefined : oldest);
    this.schedules.restore(options.schedules ?? [], nowMs);
    this.memory.markReadyChanged();
  }

  // ---- producers ----------------------------------------------------------------------

  /** Admits new tasks (see `Admission.enqueue`). */
  enqueue(tasks: readonly NewTask[], known: KnownIds, nowMs: number, atomic: boolean): EnqueueOutcome[] {
    return this.admission.enqueue(tasks, known, nowMs, atomic);
  }

  // ---- workers ------------------------------------------------------------------------

  /**
   * The dispatch rule. Up to `max` deliveries, in dispatch order (highest priority first,
   * FIFO or round-robin within a priority); the answer stops growing once its payloads add
   * up to `maxBytes` (the first delivery is always taken, however large). `workerId` is
   * the caller's, kept with each attempt. A fired batch is
   * one delivery, and only for a caller with a batch handler for its type.
   *
   * Gates, in order: a paused queue hands out nothing; an expired or overdue task is
   * archived on the way; a saturated key holds the task (it spends no token and no worker
   * capacity); then the rate limit stops the cycle (the task stays at the head). A task
   * that passes them all is served: its round-robin key advances, then its lease opens.
   */
  lease(max: number, nowMs: number, caps: LeaseCaps = NO_BATCHES, maxBytes = Infinity, workerId = ""): DeliveryPlan[] {
    const { memory, settings } = this;
    const plans: DeliveryPlan[] = [];
    if (settings.paused) return plans;
    let throttled = false;
    let bytes = 0;
    while (plans.length < max && bytes < maxBytes) {
      const popped = memory.ready.pop(caps);
      if (!popped) break;
      const item = popped.item;
      // A packed task at a saturated key is held as it is, packed (a saturated key can
      // hold most of a backlog); anything else about it is decided on its entry below.
      if (popped.packed) {
        const key = memory.entries.packedKeyOf(item.id, item.seq, nowMs);
        if (key !== undefined && this.rules.holdAtKey(key, item)) {
          throttled = true;
          continue;
        }
      }
      if (popped.batchType !== undefined) {
        const members = this.groups.liveBatch(item)?.filter((m) => !this.exits.expireIfOverdue(m, nowMs));
        if (!members || members.length === 0) continue;
        if (!settings.takeToken(nowMs)) {
          memory.ready.pushBatch(popped.batchType, item);
          memory.report({ kind: "rate_limited" });
          break;
        }
        this.groups.delivered(item.id);
        for (const m of members) memory.ranks.served(m);
        plans.push(this.leases.open(members, nowMs, workerId));
        for (const m of members) bytes += m.payloadBytes;
        continue;
      }
      const e = memory.liveReady(item);
      if (!e) continue;
      if (this.exits.expireIfOverdue(e, nowMs)) continue;
      const saturated = this.rules.saturatedSlot(e);
      if (saturated !== undefined) {
        this.rules.hold(e, saturated, item);
        memory.holdPacked(e);
        throttled = true;
        continue;
      }
      if (!settings.takeToken(nowMs)) {
        memory.ready.pushTask(item);
        memory.report({ kind: "rate_limited" });
        break;
      }
      memory.ranks.served(e);
      plans.push(this.leases.open([e], nowMs, workerId));
      bytes += e.payloadBytes;
    }
    if (throttled) memory.report({ kind: "throttled" });
    if (plans.length > 0) memory.report({ kind: "dispatched", count: plans.length });
    return plans;
  }

  /** Extends held leases by a full TTL; reports lost and cancelled ones. */
  heartbeat(leaseIds: readonly string[], nowMs: number): LeaseStatusView[] {
    return this.leases.heartbeat(leaseIds, nowMs);
  }

  /** Applies worker outcomes; returns null per applied item or the error that refused it. */
  settle(items: readonly Settlement[], nowMs: number): (ConveyorError | null)[] {
    return items.map((s) => this.leases.settle(s, nowMs));
  }

  /** A shared slot freed elsewhere on the node: held tasks of it may run now. */
  wakeSlot(slot: string): void {
    this.rules.wakeSlot(slot);
  }

  // ---- time ----------------------------------------------------------------------------

  /** Promotes due tasks, expires overdue ones, ends lapsed leases, fires groups, refills the rate limit. */
  tick(nowMs: number): void {
    const { memory, settings } = this;
    // A refilled token may make waiting work dispatchable again.
    if (settings.limited && memory.ready.size > 0 && settings.hasToken(nowMs)) memory.markReadyChanged();
    for (let top = memory.due.popDue(nowMs); top; top = memory.due.popDue(nowMs)) this.fireDue(top, nowMs);
    memory.compactTimers();
    this.leases.endDue(nowMs);
    this.groups.fireDue(nowMs);
  }

  /** A due timer fired: promote its task, or archive it if it expired while waiting. */
  private fireDue(item: DueItem, nowMs: number): void {
    // Looked at without unpacking first: a packed task is unpacked only when it changes.
    const seen = this.memory.entries.view(item.id);
    if (!seen) return;
    if (item.kind === "ready") {
      if ((seen.state === "scheduled" || seen.state === "retry") && seen.readyAtMs === item.atMs) this.waiting.promote(this.memory.entries.get(item.id)!);
    } else if (WAITING.has(seen.state) && isOverdue(seen, nowMs)) {
      this.exits.expireIfOverdue(this.memory.entries.get(item.id)!, nowMs);
    }
  }

  /** When `tick` next has work; undefined when nothing is timed. */
  nextWakeAtMs(): number | undefined {
    const { memory, settings } = this;
    const candidates = [memory.due.nextAtMs(), memory.leases.nextAtMs()];
    // Rate-limited work wakes the grain when the next token arrives.
    if (settings.limited && memory.ready.size > 0) candidates.push(settings.nextTokenAtMs());
    candidates.push(this.groups.nextFireAtMs, this.schedules.nextAtMs);
    let next: number | undefined;
    for (const c of candidates) if (c !== undefined && (next === undefined || c < next)) next = c;
    return next;
  }

  // ---- schedules -----------------------------------------------------------------------

  /** Ids of the tasks `fireSchedules(nowMs)` may enqueue: the shell looks up those that finished. */
  dueScheduleTaskIds(nowMs: number): string[] {
    return this.schedules.dueTaskIds(nowMs);
  }

  /** Enqueues the latest due tick of each schedule (see Schedules.fire). */
  fireSchedules(nowMs: number, known: KnownIds): void {
    this.schedules.fire(nowMs, known);
  }

  /** An operator's command on a schedule; `known` as for enqueue (a run-now's id). */
  schedule(cmd: ScheduleCommand, nowMs: number, known: KnownIds): ScheduleAnswer | ConveyorError {
    return this.schedules.command(cmd, nowMs, known);
  }

  listSchedules(): ScheduleState[] {
    return this.schedules.list();
  }

  // ---- operators ---------------------------------------------------------------------

  setPaused(paused: boolean, nowMs: number): void {
    this.settings.setPaused(paused, nowMs);
  }

  get paused(): boolean {
    return this.settings.paused;
  }

  /** Changes the per-key limit live; lowering it keeps running tasks. */
  setKeyLimit(limit: number | undefined, nowMs: number): void {
    this.settings.setKeyLimit(limit, nowMs);
  }

  get keyLimit(): number | undefined {
    return this.settings.keyLimit;
  }

  /** Changes the rate limit live (undefined: back to the server default). */
  setRateLimit(spec: RateLimitSpec | undefined, nowMs: number): void {
    this.settings.setRateLimit(spec, nowMs);
  }

  get rateLimit(): RateLimitSpec | undefined {
    return this.settings.rateLimit;
  }

  /** A group's thresholds: its override, else the queue default, else the server's. */
  groupConfigOf(group: string): GroupConfig {
    return this.groups.configOf(group);
  }

  /** Sets or (undefined) clears a group override; false when there was nothing to clear. */
  setGroupConfig(group: string, config: GroupConfig | undefined, nowMs: number): boolean {
    return this.groups.setConfig(group, config, nowMs);
  }

  /** Cancels an unfinished task in memory; a running one loses its lease at once. */
  cancel(id: string, reason: CancelReason, nowMs: number): ConveyorError | null {
    return this.operator.cancel(id, reason, nowMs);
  }

  /** Makes a scheduled or retry task pending now. */
  runNow(id: string): ConveyorError | null {
    return this.operator.runNow(id);
  }

  /** Dead-letters a waiting task. */
  archive(id: string, nowMs: number): ConveyorError | null {
    return this.operator.archive(id, nowMs);
  }

  /** Deletes a waiting task (finished tasks are deleted by the shell, not the core). */
  delete(id: string): ConveyorError | null {
    return this.operator.delete(id);
  }

  /** Brings an archived or cancelled task back to pending with a fresh set of retries. */
  revive(record: TaskRecord, nowMs: number): ConveyorError | null {
    return this.operator.revive(record, nowMs);
  }

  /** Deletes a finished task's row (the core does not hold it; the shell found it). */
  deleteFinished(id: string): void {
    this.operator.deleteFinished(id);
  }

  /** Forgets the queue's settings; refused while it holds unfinished tasks (see QueueRemoval). */
  remove(): ConveyorError | null {
    return this.removal.remove();
  }

  /** Why the queue cannot be removed now (it holds unfinished tasks), or null. */
  removalRefusal(): ConveyorError | null {
    return this.removal.refusal();
  }

  /** Ids of the unfinished tasks in `state`, in arrival order (a snapshot for bulk actions). */
  idsInState(state: TaskState): string[] {
    return this.memory.entries.idsInState(state);
  }

  /** The state of an unfinished task; undefined when the core does not hold it. */
  stateOf(id: string): TaskState | undefined {
    return this.memory.entries.stateOf(id);
  }

  // ---- views for the shell -----------------------------------------------------------

  /**
   * True when a lease call could get work now (held tasks do not count). Not a pure
   * query: dead heads of the ready queues (tasks that finished or moved) are dropped on
   * the way, which is why the name says so.
   */
  pruneAndHasDispatchable(nowMs: number, caps: LeaseCaps = NO_BATCHES): boolean {
    const { ready } = this.memory;
    if (this.settings.paused || !this.settings.hasToken(nowMs)) return false;
    for (let top = ready.peek(caps); top; top = ready.peek(caps)) {
      const live = top.batchType === undefined ? this.memory.isLiveReady(top.item) : this.groups.liveBatch(top.item)?.length;
      if (live) return true;
      ready.dropHead(top);
    }
    return false;
  }

  /** Live groups and fired batches that wait for a worker. */
  listGroups(): GroupStatus[] {
    return this.groups.list();
  }

  /** The payload size of an unfinished task (0 when the core does not hold it). */
  payloadBytesOf(id: string): number {
    return this.memory.entries.payloadBytesOf(id) ?? 0;
  }

  has(id: string): boolean {
    return this.memory.entries.has(id);
  }

  /** Ids of the tasks held packed in columns (for tests: the packed index must be invisible otherwise). */
  packedTaskIds(): string[] {
    return this.memory.entries.packedIds();
  }

  /** Unfinished tasks in memory, copies (for tests and the rebuild check). */
  snapshot(): TaskIndexEntry[] {
    return snapshotOf(this.memory);
  }

  stats(): CoreStats {
    return statsOf(this.memory, this.rules.slots);
  }

  inflightOfKey(key: string): number {
    return this.rules.slots.inflightOf(slotOf(QUEUE_RULE, key));
  }

  /** Running tasks under a rule's key (for tests and views). */
  inflightOfRule(ruleId: string, key: string): number {
    return this.rules.slots.inflightOf(slotOf(ruleId, key));
  }

  /** Gives back this grain's share of node-wide slots before its memory is dropped. */
  dispose(): void {
    this.rules.releaseShared();
  }

  /** Hands the shell what this turn must persist and report, and resets them. */
  drain(): TurnOutput {
    return this.memory.drain();
  }
}
