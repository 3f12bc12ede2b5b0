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
 * What lives here:
 * - `entries`: one index entry per unfinished task (never the payload);
 * - `ready`: pending tasks in dispatch order (priority, then seq), lazily cleaned;
 * - `due` (DueTimers): timers for scheduled/retry promotion, pre-dispatch expiry and deadlines;
 * - `leases` (LeaseTable): deliveries held by workers, when they lapse
 *   without heartbeats, and when their attempt ends (timeout or deadline): a lease ends
 *   at the earlier of the two, whatever the worker does;
 * - `slots`: per-key in-flight counts and held tasks (per-key concurrency limit);
 * - `unique`: unique keys held by unfinished tasks;
 * - `bucket`: the queue's rate limit (token bucket), if any.
 *
 * Dispatch gates, in order: a saturated key holds the task (it spends no token and no
 * worker capacity), then the rate limit stops the cycle (the task stays at the head).
 */
import { ConveyorError } from "../../base/errors.js";
import { quote } from "../../base/limits.js";
import type { Random } from "../../base/random.js";
import { retryDelayMs } from "./backoff.js";
import type { CoreEvent, Effect, FinishTransition } from "./effects.js";
import { DispatchRanks } from "./dispatch-ranks.js";
import { DueTimers, WAITING, type DueItem } from "./due-timers.js";
import { LeaseTable, earliest, type Lease } from "./lease-table.js";
import { KeySlots, QUEUE_RULE, isSharedSlot, slotOf, type ReadyItem, type SlotLedger } from "./key-slots.js";
import { cancelledAtArrival, type Strategy, type TaskRule } from "./rules.js";
import { TokenBucket, type RateLimitSpec } from "./token-bucket.js";
import { GroupAggregator, type GroupConfig } from "./group-aggregator.js";
import { NO_BATCHES, ReadyQueues, type LeaseCaps } from "./ready-queues.js";
import { indexEntry, type CancelReason, type NewTask, type Outcome, type TaskIndexEntry, type TaskRecord, type TaskState } from "./task.js";

export interface CoreConfig {
  /** How long a lease lives without a heartbeat. */
  leaseTtlMs: number;
  /** The rate limit of queues without an override; undefined = unlimited. */
  defaultRateLimit?: RateLimitSpec;
  /** Group thresholds of groups without an override (server config). */
  groupDefaults: GroupConfig;
  /** How often the grain checks its groups for a fire. */
  groupSweepIntervalMs: number;
}

export interface CoreDeps {
  random: Random;
  /** A fresh, unique id, for lease ids (fencing tokens for settle and heartbeat) and batch ids. */
  newId: () => string;
  /** The node's ledger of shared (named) rules; `watch` asks to be woken when a slot frees. */
  sharedSlots?: SlotLedger & { watch(slot: string): void };
}

/** A delivery the core decided to hand out. */
export interface DeliveryPlan {
  leaseId: string;
  taskIds: string[];
  leaseExpiresAtMs: number;
  /** The effective deadline of the attempt; 0 when none. */
  deadlineAtMs: number;
  /** A fired group's members (or one redelivered member), for a batch handler. */
  batch: boolean;
  group: string;
}

/** A group waiting to fire, or a fired batch waiting for a worker. */
export interface GroupStatus {
  group: string;
  type: string;
  size: number;
  /** "aggregating": filling up; "ready": fired, waiting for a worker with a batch handler. */
  state: "aggregating" | "ready";
  firstAtMs: number;
  lastAtMs: number;
  /** When the sweep that fires it runs (aggregating groups only; 0 otherwise). */
  nextFireAtMs: number;
  config: GroupConfig;
}

interface BatchState {
  type: string;
  priority: number;
  seq: number;
  members: Set<string>;
}

export type EnqueueOutcome =
  | { ok: true; id: string; state: TaskState; existed: boolean }
  | { ok: false; error: ConveyorError };

/** What the shell knows about ids that are not in memory (finished tasks). */
export type KnownIds = ReadonlyMap<string, { queue: string; state: TaskState }>;

export interface Settlement {
  leaseId: string;
  taskId: string;
  outcome: Outcome;
  result?: Uint8Array;
  error?: string;
}

export interface LeaseStatusView {
  leaseId: string;
  held: boolean;
  cancelRequested: boolean;
  cancelReason: string;
  leaseExpiresAtMs: number;
}


/** How a task ends: a finishing transition, before the entry is attached. */
type Ending = FinishTransition extends infer T ? (T extends unknown ? Omit<T, "entry"> : never) : never;
const FINAL_STATE = { complete: "completed", archive: "archived", cancel: "cancelled" } as const;

export class QueueCore {
  private readonly entries = new Map<string, TaskIndexEntry>();
  private readonly ready = new ReadyQueues();
  /** Fired batches waiting in `ready`, by batch id. */
  private readonly batches = new Map<string, BatchState>();
  private readonly groups = new GroupAggregator();
  /** Per-group threshold overrides; the key "" is the queue-wide default. */
  private readonly groupConfigs = new Map<string, GroupConfig>();
  private sweepAtMs: number | undefined;
  private readonly due = new DueTimers();
  private readonly leases = new LeaseTable();
  private readonly unique = new Map<string, { taskId: string; untilMs: number }>();
  private readonly slots: KeySlots;
  /** Unfinished tasks under each strategy rule's slot, in arrival order. */
  private readonly ruleMembers = new Map<string, Set<string>>();
  private readonly ranks = new DispatchRanks();
  private bucket: TokenBucket | undefined;
  private pausedFlag = false;
  private effects: Effect[] = [];
  private events: CoreEvent[] = [];
  /** Set when something may have become dispatchable; the shell wakes parked leases. */
  private readyChanged = false;

  constructor(
    readonly queue: string,
    private readonly config: CoreConfig,
    private readonly deps: CoreDeps,
  ) {
    this.slots = new KeySlots((item) => this.isReady(item), deps.sharedSlots);
  }

  // ---- activation -------------------------------------------------------------------

  /**
   * Rebuilds the index from durable rows. Active leases get at least a full TTL from
   * now: heartbeats are not persisted (they would cost a write per beat), so a lease
   * loaded from disk is given the benefit of the doubt once.
   */
  load(rows: readonly TaskIndexEntry[], options: LoadOptions, nowMs: number): void {
    this.pausedFlag = options.paused;
    this.slots.setRuleLimit(QUEUE_RULE, options.keyLimit);
    this.useRateLimit(options.rateLimit, nowMs);
    for (const [group, config] of options.groupConfigs ?? []) this.groupConfigs.set(group, config);
    // Dynamic limits are durable (a key's newest task may have finished already).
    for (const [slot, limit] of options.slotLimits ?? []) this.slots.setSlotLimit(slot, limit);
    for (const row of rows) {
      const e = { ...row };
      this.entries.set(e.id, e);
      this.ranks.observeLoaded(e);
      if (e.uniqueKey && (e.uniqueUntilMs === 0 || e.uniqueUntilMs > nowMs)) {
        this.unique.set(e.uniqueKey, { taskId: e.id, untilMs: e.uniqueUntilMs });
      }
      this.joinRules(e);
      if (e.state === "active") this.loadActive(e, nowMs);
      else if (e.state === "aggregating") this.aggregate(e, nowMs);
      else this.schedule(e);
    }
    // New keys join the round being served: the oldest waiting task's rank.
    let oldest = Infinity;
    for (const e of this.entries.values()) if (e.state === "pending" && e.rules.length > 0) oldest = Math.min(oldest, e.seq);
    this.ranks.startServingAt(oldest === Infinity ? undefined : oldest);
    this.readyChanged = true;
  }

  private loadActive(e: TaskIndexEntry, nowMs: number): void {
    e.leaseExpiresAtMs = Math.max(e.leaseExpiresAtMs, nowMs + this.config.leaseTtlMs);
    // The attempt's end is durable. A row written before it was (0 with a timeout or a
    // deadline) gets its timeout from now: the benefit of the doubt, once.
    if (e.attemptEndsAtMs === 0) e.attemptEndsAtMs = effectiveDeadline(e, nowMs);
    this.leases.adopt(e.leaseId, e.id, e.leaseExpiresAtMs, e.attemptEndsAtMs);
    this.acquireSlots(e);
  }

  // ---- producers ----------------------------------------------------------------------

  /**
   * Admits new tasks. With `atomic`, nothing is admitted when any item fails (the
   * outcomes still tell which items failed). `known` lists caller-chosen ids that
   * exist in storage but not in memory (finished tasks).
   */
  enqueue(tasks: readonly NewTask[], known: KnownIds, nowMs: number, atomic: boolean): EnqueueOutcome[] {
    const plannedIds = new Set<string>();
    const plannedKeys = new Set<string>();
    const plannedGroupTypes = new Map<string, string>();
    this.compactDue();
    const outcomes = tasks.map((t) => this.admit(t, known, nowMs, plannedIds, plannedKeys, plannedGroupTypes));
    const failure = outcomes.find((o) => !o.ok);
    if (atomic && failure) return outcomes;
    tasks.forEach((t, i) => {
      const o = outcomes[i]!;
      // The state after admission: a strategy or a failed rule may have ended the task.
      if (o.ok && !o.existed) outcomes[i] = { ...o, state: this.insert(t, nowMs) };
    });
    return outcomes;
  }

  private admit(t: NewTask, known: KnownIds, nowMs: number, ids: Set<string>, keys: Set<string>, groupTypes: Map<string, string>): EnqueueOutcome {
    if (t.idChosen) {
      const live = this.entries.get(t.id);
      if (live) return { ok: true, id: t.id, state: live.state, existed: true };
      const stored = known.get(t.id);
      if (stored && stored.queue === this.queue) return { ok: true, id: t.id, state: stored.state, existed: true };
      if (stored) {
        return refused(new ConveyorError("ALREADY_EXISTS", "TASK_ID_CONFLICT",
          `task_id ${quote(t.id)} is already used by a task in queue ${quote(stored.queue)}`, "task.task_id"));
      }
      if (ids.has(t.id)) return { ok: true, id: t.id, state: initialState(t, nowMs), existed: true };
    }
    if (t.uniqueKey) {
      const holder = this.uniqueHolder(t.uniqueKey, nowMs);
      if (holder || keys.has(t.uniqueKey)) {
        return refused(new ConveyorError("ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT",
          `unique_key ${quote(t.uniqueKey)} is held by unfinished task ${quote(holder ?? "in this batch")}`,
          "task.unique_key"));
      }
      keys.add(t.uniqueKey);
    }
    if (t.group) {
      const bound = this.groups.typeOf(t.group) ?? groupTypes.get(t.group);
      if (bound !== undefined && bound !== t.type) {
        return refused(new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD",
          `task.type: group ${quote(t.group)} of queue ${quote(this.queue)} holds tasks of type ${quote(bound)}; a group is single-type, got ${quote(t.type)}`,
          "task.type"));
      }
      groupTypes.set(t.group, t.type);
    }
    // Reserved only once admitted, so a refused item never makes a later duplicate "exist".
    if (t.idChosen) ids.add(t.id);
    return { ok: true, id: t.id, state: initialState(t, nowMs), existed: false };
  }

  private uniqueHolder(key: string, nowMs: number): string | undefined {
    const held = this.unique.get(key);
    if (!held) return undefined;
    if ((held.untilMs !== 0 && held.untilMs <= nowMs) || !this.entries.has(held.taskId)) {
      this.unique.delete(key);
      return undefined;
    }
    return held.taskId;
  }

  /** Stores a new task and applies its rules' strategies; returns its resulting state. */
  private insert(t: NewTask, nowMs: number): TaskState {
    const state = initialState(t, nowMs);
    const e = indexEntry(t, {
      state, seq: state === "aggregating" ? this.ranks.nextSequence() : 0, readyAtMs: Math.max(t.processAtMs, nowMs),
      expiresAtMs: t.expiresAtMs, uniqueUntilMs: t.uniqueKey && t.uniqueTtlMs > 0 ? nowMs + t.uniqueTtlMs : 0,
      payloadBytes: t.payload.byteLength,
    });
    if (state === "pending") e.seq = this.ranks.rankOf(e);
    this.entries.set(e.id, e);
    if (e.uniqueKey) this.unique.set(e.uniqueKey, { taskId: e.id, untilMs: e.uniqueUntilMs });
    this.effects.push({ kind: "insert", task: t, entry: { ...e }, createdAtMs: nowMs });
    if (t.ruleError) {
      // A rule expression failed: the task fails with that error, never silently keyless.
      this.finish(e, { kind: "archive", outcome: { lastError: t.ruleError, lastFailedAtMs: nowMs, finishedAtMs: nowMs } });
      return e.state;
    }
    this.joinRules(e);
    if (state === "aggregating") this.aggregate(e, nowMs);
    else this.schedule(e);
    this.applyStrategies(e, nowMs);
    return e.state;
  }

  // ---- concurrency rules ----------------------------------------------------------------

  private slotsOf(e: TaskIndexEntry): string[] {
    const slots = e.concurrencyKey ? [slotOf(QUEUE_RULE, e.concurrencyKey)] : [];
    for (const r of e.rules) slots.push(slotOf(r.ruleId, r.key));
    return slots;
  }

  private acquireSlots(e: TaskIndexEntry): void {
    for (const slot of this.slotsOf(e)) this.slots.acquire(slot);
  }

  private releaseSlots(e: TaskIndexEntry): void {
    for (const slot of this.slotsOf(e)) for (const freed of this.slots.release(slot)) this.pushReady(freed);
  }

  /** The first slot, in chain order, that has no room for `e`. */
  private saturatedSlot(e: TaskIndexEntry): string | undefined {
    return this.slotsOf(e).find((slot) => this.slots.isSaturated(slot));
  }

  private joinRules(e: TaskIndexEntry): void {
    for (const r of e.rules) {
      const slot = slotOf(r.ruleId, r.key);
      let members = this.ruleMembers.get(slot);
      if (!members) this.ruleMembers.set(slot, (members = new Set()));
      members.add(e.id);
      if (e.state === "pending" && r.strategy === "GROUP_ROUND_ROBIN") this.ranks.noteRanked(slot, e.seq);
    }
  }

  private leaveRules(e: TaskIndexEntry): void {
    for (const r of e.rules) {
      const slot = slotOf(r.ruleId, r.key);
      const members = this.ruleMembers.get(slot);
      members?.delete(e.id);
      if (members?.size === 0) {
        this.ruleMembers.delete(slot);
        this.ranks.forgetKey(slot);
        // No unfinished task has this key: its next task sets the limit afresh. (Shared
        // keys may have tasks in other queues; their limits stay.)
        if (!isSharedSlot(slot)) {
          this.slots.setSlotLimit(slot, undefined);
          this.effects.push({ kind: "setSlotLimit", slot, limit: undefined });
        }
      }
    }
  }

  /**
   * What each rule's strategy does when `e` arrives (every rule of the chain applies;
   * a rule that cancels `e` ends the chain). The key's limit becomes the one computed
   * for `e`, its newest task.
   */
  private applyStrategies(e: TaskIndexEntry, nowMs: number): void {
    for (const r of e.rules) {
      if (!this.entries.has(e.id)) return;
      const slot = slotOf(r.ruleId, r.key);
      if (this.slots.limitOf(slot) !== r.maxRuns) {
        for (const freed of this.slots.setSlotLimit(slot, r.maxRuns)) this.pushReady(freed);
        this.effects.push({ kind: "setSlotLimit", slot, limit: r.maxRuns });
      }
      if (r.strategy === "GROUP_ROUND_ROBIN") continue; // waits its turn; nothing to decide at arrival
      const members = [...(this.ruleMembers.get(slot) ?? [])].map((id) => this.entries.get(id)!).filter((m) => m.id !== e.id);
      const running = members.filter((m) => m.state === "active");
      const queued = members.filter((m) => m.state === "pending");
      for (const doomed of cancelledAtArrival(r.strategy, r.maxRuns, e, running, queued)) this.cancelByRule(doomed, r.strategy, nowMs);
    }
  }

  private cancelByRule(e: TaskIndexEntry, strategy: Strategy, nowMs: number): void {
    if (!this.entries.has(e.id)) return;
    this.cancel(e.id, "CONCURRENCY_LIMIT", nowMs);
    this.events.push({ kind: "cancelled", reason: "CONCURRENCY_LIMIT", strategy });
  }

  /** Adds an aggregating member to its group (its arrival time is `readyAtMs`). */
  private aggregate(e: TaskIndexEntry, nowMs: number): void {
    this.groups.add(e.group, e.type, e.id, e.readyAtMs);
    if (this.sweepAtMs === undefined) this.sweepAtMs = nowMs + this.config.groupSweepIntervalMs;
    this.armExpiry(e);
  }

  /** Puts a waiting entry where it belongs: the dispatch order or the due timers. */
  private schedule(e: TaskIndexEntry): void {
    if (e.state === "pending") {
      this.enqueueReady(e);
    } else if (e.state === "scheduled" || e.state === "retry") {
      this.due.push(e.readyAtMs, e.id, "ready");
    }
    this.armExpiry(e);
  }

  /** Arms the pre-dispatch expiry and deadline timers of a waiting task. */
  private armExpiry(e: TaskIndexEntry): void {
    this.due.armExpiry(e);
  }

  // ---- workers ------------------------------------------------------------------------

  /**
   * Hands out up to `max` deliveries, highest priority first, FIFO within a priority.
   * A fired batch is one delivery, and only for a caller with a batch handler for its type.
   */
  /**
   * Up to `max` deliveries, in dispatch order. The answer stops growing once its payloads
   * add up to `maxBytes` (the first delivery is always taken, however large).
   */
  lease(max: number, nowMs: number, caps: LeaseCaps = NO_BATCHES, maxBytes = Infinity): DeliveryPlan[] {
    const plans: DeliveryPlan[] = [];
    if (this.pausedFlag) return plans;
    let throttled = false;
    let bytes = 0;
    while (plans.length < max && bytes < maxBytes) {
      const popped = this.ready.pop(caps);
      if (!popped) break;
      const item = popped.item;
      if (popped.batchType !== undefined) {
        const members = this.liveBatch(item)?.filter((m) => !this.expireIfOverdue(m, nowMs));
        if (!members || members.length === 0) continue;
        if (this.bucket && !this.bucket.take(nowMs)) {
          this.ready.pushBatch(popped.batchType, item);
          this.events.push({ kind: "rate_limited" });
          break;
        }
        this.batches.delete(item.id);
        for (const m of members) this.ranks.served(m);
        plans.push(this.startLease(members, nowMs));
        for (const m of members) bytes += m.payloadBytes;
        continue;
      }
      const e = this.liveReady(item);
      if (!e) continue;
      if (this.expireIfOverdue(e, nowMs)) continue;
      const saturated = this.saturatedSlot(e);
      if (saturated !== undefined) {
        this.slots.hold(saturated, item);
        // It may have been woken for a free slot under another rule of its chain: give
        // that slot to the next task held there, or it would sit free (a stall).
        for (const slot of this.slotsOf(e)) if (slot !== saturated) this.wakeSlot(slot);
        throttled = true;
        continue;
      }
      if (this.bucket && !this.bucket.take(nowMs)) {
        this.ready.pushTask(item);
        this.events.push({ kind: "rate_limited" });
        break;
      }
      this.ranks.served(e);
      plans.push(this.startLease([e], nowMs));
      bytes += e.payloadBytes;
    }
    if (throttled) this.events.push({ kind: "throttled" });
    if (plans.length > 0) this.events.push({ kind: "dispatched", count: plans.length });
    return plans;
  }

  private startLease(batch: TaskIndexEntry[], nowMs: number): DeliveryPlan {
    const leaseId = this.deps.newId();
    const expiresAtMs = nowMs + this.config.leaseTtlMs;
    // The attempt ends at the earliest member's effective deadline: a batch is one call.
    let deadlineAtMs = 0;
    for (const e of batch) deadlineAtMs = earliest(deadlineAtMs, effectiveDeadline(e, nowMs));
    const lease = this.leases.open(leaseId, expiresAtMs, deadlineAtMs);
    for (const e of batch) {
      this.acquireSlots(e);
      e.state = "active";
      e.expiresAtMs = 0; // the pre-dispatch TTL no longer applies once the task has run

      e.leaseId = leaseId;
      e.leaseExpiresAtMs = expiresAtMs;
      e.attemptEndsAtMs = deadlineAtMs;
      lease.taskIds.add(e.id);
      this.effects.push({ kind: "activate", entry: { ...e } });
    }
    const first = batch[0]!;
    return {
      leaseId, taskIds: [...lease.taskIds], leaseExpiresAtMs: expiresAtMs, deadlineAtMs,
      batch: first.batchId !== "", group: first.group,
    };
  }

  /** Archives a waiting task whose expiry or deadline has passed; true if it did. */
  private expireIfOverdue(e: TaskIndexEntry, nowMs: number): boolean {
    if (e.expiresAtMs > 0 && e.expiresAtMs <= nowMs) {
      this.finish(e, { kind: "archive", outcome: { lastError: "expired before dispatch", lastFailedAtMs: nowMs, finishedAtMs: nowMs } });
      return true;
    }
    if (e.deadlineAtMs > 0 && e.deadlineAtMs <= nowMs) {
      this.finish(e, { kind: "archive", outcome: { lastError: "deadline exceeded before dispatch", lastFailedAtMs: nowMs, finishedAtMs: nowMs } });
      return true;
    }
    return false;
  }

  /** Extends held leases by a full TTL; reports lost and cancelled ones. */
  heartbeat(leaseIds: readonly string[], nowMs: number): LeaseStatusView[] {
    return leaseIds.map((leaseId) => {
      const lease = this.liveLease(leaseId, nowMs);
      if (lease) {
        lease.expiresAtMs = nowMs + this.config.leaseTtlMs;
        return { leaseId, held: true, cancelRequested: false, cancelReason: "", leaseExpiresAtMs: lease.expiresAtMs };
      }
      const revoked = this.leases.revocation(leaseId);
      return { leaseId, held: false, cancelRequested: !!revoked, cancelReason: revoked?.reason ?? "", leaseExpiresAtMs: 0 };
    });
  }

  /** Applies worker outcomes; returns null per applied item or the error that refused it. */
  settle(items: readonly Settlement[], nowMs: number): (ConveyorError | null)[] {
    return items.map((s) => this.settleOne(s, nowMs));
  }

  private settleOne(s: Settlement, nowMs: number): ConveyorError | null {
    const lease = this.liveLease(s.leaseId, nowMs);
    const e = this.entries.get(s.taskId);
    if (!lease || !lease.taskIds.has(s.taskId) || !e || e.state !== "active" || e.leaseId !== s.leaseId) {
      const why = this.leases.revocation(s.leaseId) ? "the task was cancelled" : "its attempt timed out, it expired, was settled or never existed";
      return new ConveyorError("FAILED_PRECONDITION", "LEASE_NOT_HELD",
        `lease ${quote(s.leaseId)} does not hold task ${quote(s.taskId)}: ${why}`, "settlements.lease_id");
    }
    this.detachFromLease(lease, e);
    // A batch member that fails or is released comes back on its own, as a batch of one.
    if (e.batchId !== "" && (s.outcome === "retry" || s.outcome === "released")) e.batchId = e.id;
    switch (s.outcome) {
      case "success":
        this.finish(e, { kind: "complete", outcome: { finishedAtMs: nowMs, result: s.result ?? new Uint8Array() } });
        break;
      case "retry":
        this.failAttempt(e, s.error || "handler failed", nowMs, "backoff");
        break;
      case "skip_retry":
        this.finish(e, { kind: "archive", outcome: { lastError: s.error || "skip retry", lastFailedAtMs: nowMs, finishedAtMs: nowMs } });
        break;
      case "released":
        this.makePending(e, e.seq);
        this.armExpiry(e);
        this.effects.push({ kind: "release", entry: { ...e } });
        break;
      default: {
        const never: never = s.outcome;
        throw new Error(`unknown outcome ${String(never)}`);
      }
    }
    return null;
  }

  /** Removes an active task from its lease and frees its key slot. */
  private detachFromLease(lease: Lease, e: TaskIndexEntry): void {
    this.leases.detach(lease, e.id);
    e.leaseId = "";
    e.leaseExpiresAtMs = 0;
    e.attemptEndsAtMs = 0;
    this.releaseSlots(e);
  }

  /**
   * A failed attempt. With retries left: "backoff" waits in `retry`, "immediate" (a
   * lapsed lease) returns to pending at its old place. Without: archived.
   */
  private failAttempt(e: TaskIndexEntry, error: string, nowMs: number, mode: "backoff" | "immediate"): void {
    if (e.deadlineAtMs > 0 && e.deadlineAtMs <= nowMs) {
      this.finish(e, { kind: "archive", outcome: { lastError: `${error} (deadline exceeded: not retried)`, lastFailedAtMs: nowMs, finishedAtMs: nowMs } });
      return;
    }
    if (e.retried >= e.maxRetry) {
      this.finish(e, { kind: "archive", outcome: { lastError: error, lastFailedAtMs: nowMs, finishedAtMs: nowMs } });
      return;
    }
    e.retried += 1;
    if (mode === "immediate") {
      this.makePending(e, e.seq);
    } else {
      e.state = "retry";
      e.readyAtMs = nowMs + retryDelayMs(e.retried, e.backoffBaseMs, e.backoffMaxMs, this.deps.random);
      this.due.push(e.readyAtMs, e.id, "ready");
    }
    this.armExpiry(e);
    this.effects.push({ kind: mode === "immediate" ? "requeue" : "retry", entry: { ...e }, outcome: { lastError: error, lastFailedAtMs: nowMs } });
  }

  private makePending(e: TaskIndexEntry, seq: number): void {
    e.state = "pending";
    e.seq = seq;
    this.enqueueReady(e);
  }

  /** Puts a pending entry in the dispatch order: alone, or in its batch. */
  private enqueueReady(e: TaskIndexEntry): void {
    this.readyChanged = true;
    if (e.batchId === "") {
      this.ready.pushTask({ id: e.id, priority: e.priority, seq: e.seq });
      return;
    }
    let batch = this.batches.get(e.batchId);
    if (!batch) {
      batch = { type: e.type, priority: e.priority, seq: e.seq, members: new Set() };
      this.batches.set(e.batchId, batch);
      this.ready.pushBatch(e.type, { id: e.batchId, priority: e.priority, seq: e.seq });
    }
    batch.members.add(e.id);
  }

  /** The pending members of a batch in the dispatch order, in arrival order. */
  private liveBatch(item: ReadyItem): TaskIndexEntry[] | undefined {
    const batch = this.batches.get(item.id);
    if (!batch || batch.seq !== item.seq) return undefined;
    const members = [...batch.members]
      .map((id) => this.entries.get(id))
      .filter((e): e is TaskIndexEntry => !!e && e.state === "pending" && e.batchId === item.id)
      .sort((a, b) => a.seq - b.seq);
    if (members.length === 0) this.batches.delete(item.id);
    return members;
  }

  /** Takes a waiting entry out of its group or batch (it is leaving memory or its state). */
  private unlinkWaiting(e: TaskIndexEntry): void {
    if (e.state === "aggregating") this.groups.remove(e.group, e.id);
    else if (e.state === "pending" && e.batchId !== "") this.batches.get(e.batchId)?.members.delete(e.id);
  }

  /**
   * A waiting task of `key` left memory. It may have been a held task that was moved
   * back to the ready heap for a freed slot, so give that slot to the next held task.
   */
  private wakeSlots(e: TaskIndexEntry): void {
    for (const slot of this.slotsOf(e)) for (const freed of this.slots.wake(slot)) this.pushReady(freed);
  }

  /** A shared slot freed elsewhere on the node: held tasks of it may run now. */
  wakeSlot(slot: string): void {
    for (const freed of this.slots.wake(slot)) this.pushReady(freed);
  }

  private pushReady(item: ReadyItem): void {
    this.ready.pushTask(item);
    this.readyChanged = true;
  }

  /**
   * The one unlink path: takes an unfinished task out of memory (its group or batch, its
   * rules, the index, its unique key) and, if it was waiting, hands a slot it may have
   * been promised to the next held task. An active task has already left its lease.
   */
  private forget(e: TaskIndexEntry): void {
    const waiting = e.state !== "active";
    this.unlinkWaiting(e);
    this.leaveRules(e);
    this.entries.delete(e.id);
    if (e.uniqueKey && this.unique.get(e.uniqueKey)?.taskId === e.id) this.unique.delete(e.uniqueKey);
    if (waiting) this.wakeSlots(e);
  }

  /** Moves a task to a finished state and out of memory. */
  private finish(e: TaskIndexEntry, end: Ending): void {
    const state = FINAL_STATE[end.kind];
    this.forget(e);
    e.state = state;
    e.leaseId = "";
    e.leaseExpiresAtMs = 0;
    e.attemptEndsAtMs = 0;
    this.effects.push({ ...end, entry: { ...e } } as FinishTransition);
    this.events.push({ kind: "settled", outcome: state, count: 1 });
  }

  // ---- time ----------------------------------------------------------------------------

  /** Promotes due tasks, expires overdue ones, reclaims lapsed leases, refills the rate limit. */
  tick(nowMs: number): void {
    // A refilled token may make waiting work dispatchable again.
    if (this.bucket && this.ready.size > 0 && this.bucket.hasToken(nowMs)) this.readyChanged = true;
    for (let top = this.due.popDue(nowMs); top; top = this.due.popDue(nowMs)) this.fireDue(top, nowMs);
    this.compactDue();
    for (let lease = this.leases.popEndedAttempt(nowMs); lease; lease = this.leases.popEndedAttempt(nowMs)) this.endLease(lease, nowMs);
    for (let lease = this.leases.popExpiryDue(nowMs); lease; lease = this.leases.popExpiryDue(nowMs)) {
      // A heartbeat moved the expiry: re-arm at the new time (lazy deletion).
      if (!this.endLease(lease, nowMs)) this.leases.rearmExpiry(lease);
    }
    this.leases.forgetRevocations(nowMs);
    if (this.sweepAtMs !== undefined && this.sweepAtMs <= nowMs) this.sweepGroups(nowMs);
  }

  /** The periodic group sweep: fires every group whose threshold tripped. */
  private sweepGroups(nowMs: number): void {
    const fires = this.groups.sweep(nowMs, (g) => this.groupConfigOf(g), (id) => this.entries.get(id)?.readyAtMs ?? nowMs);
    for (const fire of fires) {
      const batchId = this.deps.newId();
      for (const id of fire.memberIds) {
        const e = this.entries.get(id)!;
        e.state = "pending";
        e.batchId = batchId;
        this.enqueueReady(e);
        this.effects.push({ kind: "fireGroup", entry: { ...e } });
      }
      this.events.push({ kind: "group_fired", size: fire.memberIds.length });
    }
    this.sweepAtMs = this.groups.size > 0 ? nowMs + this.config.groupSweepIntervalMs : undefined;
  }

  /** A group's thresholds: its override, else the queue default, else the server's. */
  groupConfigOf(group: string): GroupConfig {
    return this.groupConfigs.get(group) ?? this.groupConfigs.get("") ?? this.config.groupDefaults;
  }

  /**
   * Sets or (undefined) clears a group override ("" = the queue default); applies at the
   * next sweep. False when there was nothing to clear.
   */
  setGroupConfig(group: string, config: GroupConfig | undefined, nowMs: number): boolean {
    if (config) {
      this.groupConfigs.set(group, config);
      this.effects.push({ kind: "setGroupConfig", group, config, atMs: nowMs });
      return true;
    }
    if (!this.groupConfigs.delete(group)) return false;
    this.effects.push({ kind: "deleteGroupConfig", group });
    return true;
  }

  /** Live groups and fired batches that wait for a worker. */
  listGroups(): GroupStatus[] {
    const out: GroupStatus[] = this.groups.list().map((v) => {
      const config = this.groupConfigOf(v.group);
      const dueAt = v.size >= config.maxSize ? 0 : GroupAggregator.fireAtMs(v, config);
      return { ...v, state: "aggregating" as const, nextFireAtMs: this.sweepAt(dueAt), config };
    });
    for (const batch of this.batches.values()) {
      const members = [...batch.members].map((id) => this.entries.get(id)).filter((e): e is TaskIndexEntry => e?.state === "pending");
      if (members.length === 0) continue;
      const group = members[0]!.group;
      out.push({ group, type: batch.type, size: members.length, state: "ready", firstAtMs: 0, lastAtMs: 0, nextFireAtMs: 0, config: this.groupConfigOf(group) });
    }
    return out;
  }

  /** The first sweep at or after `atMs`. */
  private sweepAt(atMs: number): number {
    const first = this.sweepAtMs ?? atMs;
    if (atMs <= first) return first;
    const interval = this.config.groupSweepIntervalMs;
    return first + Math.ceil((atMs - first) / interval) * interval;
  }

  /** Timers of tasks that moved on stay until their time; drop them when they pile up. */
  private compactDue(): void {
    this.due.compact(this.entries.size, (id) => this.entries.get(id));
  }

  private fireDue(item: DueItem, nowMs: number): void {
    const e = this.entries.get(item.id);
    if (!e) return;
    if (item.kind === "ready") {
      if ((e.state === "scheduled" || e.state === "retry") && e.readyAtMs === item.atMs) {
        this.makePending(e, this.ranks.rankOf(e));
        this.effects.push({ kind: "promote", entry: { ...e } });
      }
    } else if (WAITING.has(e.state)) {
      this.expireIfOverdue(e, nowMs);
    }
  }

  /**
   * Ends a lease whose attempt is over or which lapsed, by whichever came first; false
   * when neither has. A lapse keeps the task's place (the worker probably died); a
   * timed-out attempt is the handler's failure and backs off like a RETRY.
   */
  private endLease(lease: Lease, nowMs: number): boolean {
    const timedOut = lease.endsAtMs > 0 && lease.endsAtMs <= nowMs;
    const lapsed = lease.expiresAtMs <= nowMs;
    if (timedOut && (!lapsed || lease.endsAtMs <= lease.expiresAtMs)) this.timeOutLease(lease, nowMs);
    else if (lapsed) this.expireLease(lease, nowMs);
    else return false;
    return true;
  }

  /**
   * The lease `leaseId` if it is still held at `nowMs`. A lease whose attempt is over
   * ends here even if the grain's timer has not fired yet: a settle or a heartbeat that
   * arrives after the attempt's end is refused, like one after its lease was reclaimed.
   */
  private liveLease(leaseId: string, nowMs: number): Lease | undefined {
    const lease = this.leases.get(leaseId);
    if (lease && lease.endsAtMs > 0 && lease.endsAtMs <= nowMs) {
      this.endLease(lease, nowMs);
      return undefined;
    }
    return lease;
  }

  /**
   * The attempt reached its end (timeout or deadline) while the worker still held it:
   * the lease is revoked, its slots are freed, and every task of it fails as timed out
   * (backoff, or archived when retries are exhausted or the deadline has passed). A
   * batch member comes back on its own, as a batch of one, like a retried member.
   */
  private timeOutLease(lease: Lease, nowMs: number): void {
    const members = [...lease.taskIds].map((id) => this.entries.get(id)).filter((e): e is TaskIndexEntry => !!e);
    const error = timeoutError(lease.endsAtMs, members);
    this.events.push({ kind: "attempt_timed_out", leaseId: lease.id, taskIds: [...lease.taskIds] });
    for (const e of members) {
      this.detachFromLease(lease, e);
      if (e.batchId !== "") e.batchId = e.id;
      this.failAttempt(e, error, nowMs, "backoff");
    }
    this.leases.close(lease.id);
  }

  private expireLease(lease: Lease, nowMs: number): void {
    const ids = [...lease.taskIds];
    this.events.push({ kind: "lease_expired", leaseId: lease.id, taskIds: ids });
    for (const id of ids) {
      const e = this.entries.get(id);
      if (!e) continue;
      this.detachFromLease(lease, e);
      this.failAttempt(e, "lease expired: the worker stopped heartbeating", nowMs, "immediate");
    }
    this.leases.close(lease.id);
  }

  /** When `tick` next has work; undefined when nothing is timed. */
  nextWakeAtMs(): number | undefined {
    const candidates = [this.due.nextAtMs(), this.leases.nextAtMs()];
    // Rate-limited work wakes the grain when the next token arrives.
    if (this.bucket && this.ready.size > 0) candidates.push(this.bucket.nextTokenAtMs());
    candidates.push(this.sweepAtMs);
    let next: number | undefined;
    for (const c of candidates) if (c !== undefined && (next === undefined || c < next)) next = c;
    return next;
  }

  // ---- operators ---------------------------------------------------------------------

  setPaused(paused: boolean, nowMs: number): void {
    if (this.pausedFlag === paused) return;
    this.pausedFlag = paused;
    this.effects.push({ kind: "setPaused", paused, atMs: nowMs });
    if (!paused) this.readyChanged = true;
  }

  get paused(): boolean {
    return this.pausedFlag;
  }

  /** Changes the per-key limit live; lowering it keeps running tasks. */
  setKeyLimit(limit: number | undefined, nowMs: number): void {
    for (const freed of this.slots.setRuleLimit(QUEUE_RULE, limit)) this.pushReady(freed);
    this.effects.push({ kind: "setKeyLimit", limit, atMs: nowMs });
  }

  /** Changes the rate limit live (undefined: back to the server default). */
  setRateLimit(spec: RateLimitSpec | undefined, nowMs: number): void {
    this.useRateLimit(spec, nowMs);
    this.effects.push({ kind: "setRateLimit", spec, atMs: nowMs });
  }

  private useRateLimit(spec: RateLimitSpec | undefined, nowMs: number): void {
    const effective = spec ?? this.config.defaultRateLimit;
    this.bucket = effective ? new TokenBucket(effective, nowMs) : undefined;
    this.readyChanged = true;
  }

  get rateLimit(): RateLimitSpec | undefined {
    return this.bucket?.spec;
  }

  /** Cancels an unfinished task in memory; a running one loses its lease at once. */
  cancel(id: string, reason: CancelReason, nowMs: number): ConveyorError | null {
    const e = this.entries.get(id);
    if (!e) return notInMemory(id);
    if (e.state === "active") {
      const lease = this.leases.get(e.leaseId);
      if (lease) {
        this.detachFromLease(lease, e);
        if (!this.leases.has(lease.id)) this.leases.revoke(lease.id, reason, nowMs + this.config.leaseTtlMs);
      }
    }
    this.finish(e, { kind: "cancel", outcome: { finishedAtMs: nowMs, cancelReason: reason } });
    return null;
  }

  /** Makes a scheduled or retry task pending now. */
  runNow(id: string): ConveyorError | null {
    const e = this.entries.get(id);
    if (!e) return notInMemory(id);
    if (e.state !== "scheduled" && e.state !== "retry") return wrongState(id, e.state, "run", "scheduled or retry");
    this.makePending(e, this.ranks.rankOf(e));
    this.effects.push({ kind: "promote", entry: { ...e } });
    return null;
  }

  /** Dead-letters a waiting task. */
  archive(id: string, nowMs: number): ConveyorError | null {
    const e = this.entries.get(id);
    if (!e) return notInMemory(id);
    if (!WAITING.has(e.state)) return wrongState(id, e.state, "archive", "pending, scheduled or retry");
    this.finish(e, { kind: "archive", outcome: { lastError: "archived by an operator", finishedAtMs: nowMs } });
    return null;
  }

  /** Deletes a waiting task (finished tasks are deleted by the shell, not the core). */
  delete(id: string): ConveyorError | null {
    const e = this.entries.get(id);
    if (!e) return notInMemory(id);
    if (e.state === "active") return wrongState(id, e.state, "delete", "not running (cancel it first)");
    this.forget(e);
    this.effects.push({ kind: "delete", id });
    return null;
  }

  /** Brings an archived or cancelled task back to pending with a fresh set of retries. */
  revive(record: TaskRecord, nowMs: number): ConveyorError | null {
    if (record.state !== "archived" && record.state !== "cancelled") {
      return wrongState(record.id, record.state, "retry", "archived or cancelled");
    }
    if (record.uniqueKey && this.uniqueHolder(record.uniqueKey, nowMs)) {
      return new ConveyorError("ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT",
        `unique_key ${quote(record.uniqueKey)} is held by another unfinished task`, "id");
    }
    const e = indexEntry(record, {
      state: "pending", seq: 0, readyAtMs: nowMs, expiresAtMs: 0, uniqueUntilMs: record.uniqueUntilMs,
      // A group member comes back on its own, as a batch of one.
      batchId: record.group ? record.id : "", payloadBytes: record.payload.byteLength,
    });
    this.entries.set(e.id, e);
    if (e.uniqueKey) this.unique.set(e.uniqueKey, { taskId: e.id, untilMs: e.uniqueUntilMs });
    this.joinRules(e);
    this.makePending(e, this.ranks.rankOf(e));
    this.armExpiry(e);
    this.effects.push({ kind: "revive", entry: { ...e } });
    return null;
  }

  // ---- views for the shell -----------------------------------------------------------

  /**
   * True when a lease call could get work now (held tasks do not count). Not a pure
   * query: dead heads of the ready queues (tasks that finished or moved) are dropped on
   * the way, which is why the name says so.
   */
  pruneAndHasDispatchable(nowMs: number, caps: LeaseCaps = NO_BATCHES): boolean {
    if (this.pausedFlag) return false;
    if (this.bucket && !this.bucket.hasToken(nowMs)) return false;
    for (let top = this.ready.peek(caps); top; top = this.ready.peek(caps)) {
      const live = top.batchType === undefined ? this.liveReady(top.item) : this.liveBatch(top.item)?.length;
      if (live) return true;
      this.ready.dropHead(top);
    }
    return false;
  }

  /** The payload size of an unfinished task (0 when the core does not hold it). */
  payloadBytesOf(id: string): number {
    return this.entries.get(id)?.payloadBytes ?? 0;
  }

  has(id: string): boolean {
    return this.entries.has(id);
  }

  /** Unfinished tasks in memory, copies (for tests and the rebuild check). */
  snapshot(): TaskIndexEntry[] {
    return [...this.entries.values()].map((e) => ({ ...e }));
  }

  stats(): { unfinished: number; leases: number; inflightKeyed: number; held: number; timers: number } {
    return {
      unfinished: this.entries.size, leases: this.leases.size, inflightKeyed: this.slots.inflightTotal(),
      held: this.slots.heldTotal(), timers: this.due.size,
    };
  }

  get keyLimit(): number | undefined {
    return this.slots.limit;
  }

  inflightOfKey(key: string): number {
    return this.slots.inflightOf(slotOf(QUEUE_RULE, key));
  }

  /** Running tasks under a rule's key (for tests and views). */
  inflightOfRule(ruleId: string, key: string): number {
    return this.slots.inflightOf(slotOf(ruleId, key));
  }

  /**
   * Gives back this grain's share of node-wide (shared-rule) slots before its memory is
   * dropped: the next activation counts its running tasks again.
   */
  dispose(): void {
    for (const e of this.entries.values()) {
      if (e.state !== "active") continue;
      for (const slot of this.slotsOf(e)) if (isSharedSlot(slot)) this.slots.release(slot);
    }
  }

  /** Hands the shell what this turn must persist and report, and resets them. */
  drain(): { effects: Effect[]; events: CoreEvent[]; readyChanged: boolean } {
    const out = { effects: this.effects, events: this.events, readyChanged: this.readyChanged };
    this.effects = [];
    this.events = [];
    this.readyChanged = false;
    return out;
  }

  private liveReady(item: ReadyItem): TaskIndexEntry | undefined {
    const e = this.entries.get(item.id);
    return e && e.state === "pending" && e.seq === item.seq ? e : undefined;
  }

  private isReady(item: ReadyItem): boolean {
    return this.liveReady(item) !== undefined;
  }
}

function initialState(t: NewTask, nowMs: number): TaskState {
  if (t.group !== "") return "aggregating";
  return t.processAtMs > nowMs ? "scheduled" : "pending";
}

export interface LoadOptions {
  paused: boolean;
  /** Durable dynamic limits of this queue's rule keys. */
  slotLimits?: ReadonlyMap<string, number>;
  keyLimit?: number;
  rateLimit?: RateLimitSpec;
  /** Group overrides by group name ("" = the queue default). */
  groupConfigs?: ReadonlyMap<string, GroupConfig>;
}

/**
 * When an attempt of `e` leased at `nowMs` ends: the earlier of its deadline and now +
 * its timeout; 0 = never. Kept a safe integer (it is stored as an INTEGER and sent as an
 * int64): an instant past 2^53 ms is centuries away and means the same as "never soon".
 */
function effectiveDeadline(e: TaskIndexEntry, nowMs: number): number {
  const end = earliest(e.deadlineAtMs, e.timeoutMs > 0 ? nowMs + e.timeoutMs : 0);
  return Math.min(end, Number.MAX_SAFE_INTEGER);
}

/**
 * Why an attempt that ended at `endsAtMs` failed: a member's deadline (the task is then
 * archived, not retried), or the shortest per-attempt timeout among its members.
 */
function timeoutError(endsAtMs: number, members: readonly TaskIndexEntry[]): string {
  if (members.some((e) => e.deadlineAtMs > 0 && e.deadlineAtMs <= endsAtMs)) return "attempt timed out at the task's deadline";
  const timeouts = members.map((e) => e.timeoutMs).filter((t) => t > 0);
  return timeouts.length > 0 ? `timed out after ${Math.min(...timeouts)}ms` : "attempt timed out";
}


const refused = (error: ConveyorError): EnqueueOutcome => ({ ok: false, error });

/** The core only holds unfinished tasks; the shell resolves what this means. */
function notInMemory(id: string): ConveyorError {
  return new ConveyorError("NOT_FOUND", "TASK_NOT_FOUND", `task ${quote(id)} is not unfinished in this queue`);
}

function wrongState(id: string, state: TaskState, action: string, wanted: string): ConveyorError {
  return new ConveyorError("FAILED_PRECONDITION", "TASK_STATE_CONFLICT",
    `cannot ${action} task ${quote(id)}: it is ${state}, the action needs it ${wanted}`);
}
