/**
 * Model-checked random command sequences for concurrency strategies in the pure core.
 *
 * Each run draws a schema: three task types, each with a chain of one or two rules and
 * a random strategy per rule. Commands enqueue tasks over a few keys with random (or,
 * per profile, static) maxRuns in 1..3, lease, settle held leases with random outcomes,
 * advance time and tick (lease expiry, retries), heartbeat, cancel, and passivate.
 *
 * The runner mirrors every drained effect into a "storage" model and keeps a reference
 * model of the strategies (written from the contract: the limit of a key is its newest
 * task's maxRuns; CANCEL_IN_PROGRESS keeps the newest max live runs, running ones
 * cancelled first; CANCEL_NEWEST cancels a newcomer when max runs are live; the
 * cancel-queued strategies keep max of the waiting runs beyond the free slots). Checked:
 *  (a) a lease never hands out a task one of whose slots already has ≥ its limit in flight;
 *  (b) after every step, each slot's in-flight count matches the model and never exceeds
 *      the limit in force when its running tasks were dispatched;
 *  (c) every task ends exactly once (one final transition effect), never duplicated or lost;
 *  (d) strategy cancels are exactly the model's, with cancelReason CONCURRENCY_LIMIT; a
 *      cancelled running task loses its lease at once (heartbeat, late settle refused);
 *  (e) passivation (reload from the rows in seq order) changes nothing for the next lease;
 *  (f) per profile: a short lease leaves no pending task whose every slot has room.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import type { CoreEvent, Effect } from "../../src/grains/queue/effects.js";
import { QUEUE_RULE, slotOf } from "../../src/grains/queue/key-slots.js";
import { QueueCore, type DeliveryPlan } from "../../src/grains/queue/queue-core.js";
import { STRATEGIES, type Strategy, type TaskRule } from "../../src/grains/queue/rules.js";
import { FINISHED_STATES, type NewTask, type Outcome, type TaskIndexEntry, type TaskState } from "../../src/grains/queue/task.js";
import { NO_KNOWN, QUEUE, coreConfig, isStateTransition, newTask, outcomeOf } from "../support/core-fixtures.js";

const TTL = 1_000;
const KEYS = ["a", "b", "c"] as const;
const QUEUE_KEYS = ["A", "B"] as const;
const TYPES = ["t0", "t1", "t2"] as const;
const BACKOFF_BASE = 100;
const BACKOFF_MAX = 1_000;

// ---- schema, profiles, commands ------------------------------------------------------

interface TypeSpec {
  strategies: Strategy[];
  /** Tasks of this type carry a queue concurrency key (one more slot). */
  queueKeyed: boolean;
}

interface Schema {
  types: TypeSpec[];
  keyLimit: number;
  /** Static maxRuns per (type, rule index, key), used when the profile is not dynamic. */
  staticMax: number[];
}

interface Profile {
  minChain: 1 | 2;
  maxChain: 1 | 2;
  strategies: readonly Strategy[];
  /** maxRuns are drawn from 1..maxRunsMax. */
  maxRunsMax: number;
  dynamicLimits: boolean;
  queueKeys: boolean;
  scheduled: boolean;
  outcomes: Outcome[];
  /** Check (f) for every task (true) or only for tasks with a single slot (false). */
  stallCheckAll: boolean;
  weights: Record<Cmd["kind"], number>;
}

interface ItemSpec {
  type: number;
  keys: number[];
  maxRuns: number[];
  priority: number;
  processInMs: number;
  queueKey: number;
  maxRetry: number;
}

type Cmd =
  | { kind: "enqueue"; items: ItemSpec[] }
  | { kind: "lease"; max: number }
  | { kind: "settle"; pick: number; outcome: number; stale: boolean }
  | { kind: "advance"; ms: number }
  | { kind: "heartbeat"; pick: number }
  | { kind: "cancel"; pick: number }
  | { kind: "passivate"; max: number };

const ALL_OUTCOMES: Outcome[] = ["success", "retry", "skip_retry", "released"];

/** Chains, dynamic limits, queue keys, scheduled tasks, retries; passivation is added by the last test. */
const CHAINS: Profile = {
  minChain: 1, maxChain: 2, strategies: STRATEGIES, maxRunsMax: 3, dynamicLimits: true, queueKeys: true, scheduled: true, outcomes: ALL_OUTCOMES, stallCheckAll: true,
  weights: { enqueue: 5, lease: 4, settle: 4, advance: 2, heartbeat: 1, cancel: 1, passivate: 0 },
};

/** Passivation with single static rules (the fast profile). */
const PASSIVATION: Profile = {
  minChain: 1, maxChain: 1, strategies: STRATEGIES, maxRunsMax: 3, dynamicLimits: false, queueKeys: false, scheduled: false, outcomes: ["success", "skip_retry", "released"], stallCheckAll: true,
  weights: { enqueue: 5, lease: 4, settle: 4, advance: 2, heartbeat: 1, cancel: 1, passivate: 2 },
};

/** Every type chains two round-robin rules with limit 1: many held tasks, woken and re-held. */
const TIGHT_CHAINS: Profile = {
  minChain: 2, maxChain: 2, strategies: ["GROUP_ROUND_ROBIN"], maxRunsMax: 1, dynamicLimits: false, queueKeys: false, scheduled: false,
  outcomes: ["success", "released"], stallCheckAll: true,
  weights: { enqueue: 4, lease: 4, settle: 3, advance: 1, heartbeat: 0, cancel: 1, passivate: 0 },
};

const schemaArb = (p: Profile): fc.Arbitrary<Schema> => fc.record({
  types: fc.array(
    fc.record({
      strategies: fc.array(fc.constantFrom(...p.strategies), { minLength: p.minChain, maxLength: p.maxChain }),
      queueKeyed: p.queueKeys ? fc.boolean() : fc.constant(false),
    }),
    { minLength: TYPES.length, maxLength: TYPES.length },
  ),
  keyLimit: fc.integer({ min: 1, max: 3 }),
  staticMax: fc.array(fc.integer({ min: 1, max: p.maxRunsMax }), { minLength: TYPES.length * 2 * KEYS.length, maxLength: TYPES.length * 2 * KEYS.length }),
});

const itemArb = (p: Profile): fc.Arbitrary<ItemSpec> => fc.record({
  type: fc.integer({ min: 0, max: TYPES.length - 1 }),
  // Keys skew to "a" so that keys fill up and strategies act.
  keys: fc.array(fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: KEYS.length - 1 }) }), { minLength: 2, maxLength: 2 }),
  maxRuns: fc.array(fc.integer({ min: 1, max: p.maxRunsMax }), { minLength: 2, maxLength: 2 }),
  priority: fc.oneof({ weight: 3, arbitrary: fc.constant(4) }, { weight: 1, arbitrary: fc.constantFrom(1, 9) }),
  processInMs: p.scheduled
    ? fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 1_500 }) })
    : fc.constant(0),
  queueKey: fc.integer({ min: 0, max: QUEUE_KEYS.length - 1 }),
  maxRetry: fc.integer({ min: 0, max: 2 }),
});

const pick = fc.nat({ max: 1_000 });

function cmdArb(p: Profile): fc.Arbitrary<Cmd> {
  const w = p.weights;
  const all: fc.WeightedArbitrary<Cmd>[] = [
    { weight: w.enqueue, arbitrary: fc.record({ kind: fc.constant("enqueue" as const), items: fc.array(itemArb(p), { minLength: 1, maxLength: 3 }) }) },
    { weight: w.lease, arbitrary: fc.record({ kind: fc.constant("lease" as const), max: fc.integer({ min: 1, max: 4 }) }) },
    {
      weight: w.settle,
      arbitrary: fc.record({
        kind: fc.constant("settle" as const), pick, outcome: fc.nat({ max: p.outcomes.length - 1 }),
        stale: fc.oneof({ weight: 6, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      }),
    },
    { weight: w.advance, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.oneof(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 400, max: 1_600 })) }) },
    { weight: w.heartbeat, arbitrary: fc.record({ kind: fc.constant("heartbeat" as const), pick }) },
    { weight: w.cancel, arbitrary: fc.record({ kind: fc.constant("cancel" as const), pick }) },
    { weight: w.passivate, arbitrary: fc.record({ kind: fc.constant("passivate" as const), max: fc.integer({ min: 1, max: 4 }) }) },
  ];
  return fc.oneof(...all.filter((a) => a.weight > 0));
}

// ---- the runner ------------------------------------------------------------------------

const readyBefore = (a: TaskIndexEntry, b: TaskIndexEntry) => (a.priority !== b.priority ? a.priority > b.priority : a.seq < b.seq);
const withoutLeaseExpiry = ({ leaseExpiresAtMs: _, ...rest }: TaskIndexEntry) => rest;
const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** Every slot a task of the schema can use: [ruleId, key] (queue rule "q" included). */
function allSlots(): Array<[string, string]> {
  const out: Array<[string, string]> = QUEUE_KEYS.map((k) => [QUEUE_RULE, k]);
  for (const t of TYPES) for (let i = 0; i < 2; i++) for (const k of KEYS) out.push([`${t}#${i}`, k]);
  return out;
}
const SLOTS = allSlots();

const coverage = {
  leases: 0, throttled: 0, strategyCancels: 0, runningPreempted: 0, newcomerCancelled: 0, queuedCancelled: 0,
  limitRaised: 0, limitLowered: 0, overLimitAfterLower: 0, stallChecks: 0, leaseExpired: 0, retries: 0,
  passivationsWithActive: 0, passivationsWithLeases: 0, operatorCancels: 0, chains: 0,
};
type CoverageKey = keyof typeof coverage;
const resetCoverage = () => { for (const k of Object.keys(coverage) as CoverageKey[]) coverage[k] = 0; };

class Runner {
  core: QueueCore;
  nowMs = 1_000_000;
  readonly rows = new Map<string, TaskIndexEntry>();
  /** Stored dynamic limits of this queue's own rule keys (slotLimit effects). */
  readonly slotLimits = new Map<string, number>();
  readonly finished = new Map<string, { state: TaskState; cancelReason: string }>();
  readonly inserted = new Set<string>();
  readonly leases = new Map<string, { taskId: string; expiresAtMs: number }>();
  readonly deadLeases: string[] = [];
  /** The model's limit of every rule slot (a key's limit is its newest task's maxRuns). */
  readonly limits = new Map<string, number>();
  /** For each running task, the limit of each of its slots when it was dispatched. */
  readonly dispatchLimits = new Map<string, Map<string, number>>();
  readonly arrival = new Map<string, number>();
  /** Ids cancelled with CONCURRENCY_LIMIT, in effect order. */
  readonly strategyCancelLog: string[] = [];
  private arrivals = 0;
  private taskNo = 0;
  private leaseNo = 0;
  private coreNo = 0;

  constructor(private readonly seed: number, private readonly schema: Schema, private readonly profile: Profile) {
    this.core = this.newCore();
    this.core.setKeyLimit(schema.keyLimit, this.nowMs);
    this.core.drain(); // the setting's own effect; the model tracks task rows
  }

  private newCore(): QueueCore {
    this.coreNo += 1;
    return new QueueCore(QUEUE, coreConfig(TTL), { random: seededRandom(this.seed * 31 + this.coreNo), newId: () => `L${++this.leaseNo}` });
  }

  run(cmd: Cmd): void {
    switch (cmd.kind) {
      case "enqueue": return this.enqueue(cmd.items);
      case "lease": return this.lease(cmd.max);
      case "settle": return this.settle(cmd.pick, this.profile.outcomes[cmd.outcome]!, cmd.stale);
      case "advance": return this.advance(cmd.ms);
      case "heartbeat": return this.heartbeat(cmd.pick);
      case "cancel": return this.cancel(cmd.pick);
      case "passivate": return this.passivate(cmd.max);
    }
  }

  // -- slots --

  private slotsOf(e: { concurrencyKey: string; rules: TaskRule[] }): string[] {
    const slots = e.concurrencyKey ? [slotOf(QUEUE_RULE, e.concurrencyKey)] : [];
    for (const r of e.rules) slots.push(slotOf(r.ruleId, r.key));
    return slots;
  }

  private limitOf(slot: string): number {
    if (slot.startsWith(`${QUEUE_RULE}\u0000`)) return this.schema.keyLimit;
    const limit = this.limits.get(slot);
    if (limit === undefined) throw new Error(`the model knows no limit of ${slot.replace("\u0000", "/")}`);
    return limit;
  }

  private activeBySlot(): Map<string, number> {
    const m = new Map<string, number>();
    for (const e of this.rows.values()) if (e.state === "active") for (const s of this.slotsOf(e)) m.set(s, (m.get(s) ?? 0) + 1);
    return m;
  }

  // -- commands --

  private build(it: ItemSpec): NewTask {
    const type = TYPES[it.type]!;
    const spec = this.schema.types[it.type]!;
    const rules: TaskRule[] = spec.strategies.map((strategy, i) => {
      const key = KEYS[it.keys[i]!]!;
      const maxRuns = this.profile.dynamicLimits ? it.maxRuns[i]! : this.schema.staticMax[(it.type * 2 + i) * KEYS.length + it.keys[i]!]!;
      return { ruleId: `${type}#${i}`, key, maxRuns, strategy };
    });
    return newTask({
      id: `t${++this.taskNo}`, type, rules, priority: it.priority, maxRetry: it.maxRetry,
      concurrencyKey: spec.queueKeyed ? QUEUE_KEYS[it.queueKey]! : "",
      processAtMs: it.processInMs > 0 ? this.nowMs + it.processInMs : 0,
      backoffBaseMs: BACKOFF_BASE, backoffMaxMs: BACKOFF_MAX,
    });
  }

  /**
   * The reference model of arrival: for each new task, each rule in chain order sets its
   * key's limit and applies its strategy to the key's unfinished tasks (oldest first).
   */
  private expectArrivals(tasks: NewTask[]): { cancels: string[]; strategies: Strategy[]; states: TaskState[] } {
    const sim = new Map<string, { state: TaskState; rules: TaskRule[] }>();
    for (const [id, e] of this.rows) sim.set(id, { state: e.state, rules: e.rules });
    const cancels: string[] = [];
    const strategies: Strategy[] = [];
    const states: TaskState[] = [];
    for (const t of tasks) {
      this.arrival.set(t.id, ++this.arrivals);
      const state: TaskState = t.processAtMs > this.nowMs ? "scheduled" : "pending";
      sim.set(t.id, { state, rules: t.rules });
      for (const r of t.rules) {
        if (!sim.has(t.id)) break; // a rule that cancels the newcomer ends the chain
        const slot = slotOf(r.ruleId, r.key);
        const before = this.limits.get(slot);
        if (before !== undefined && r.maxRuns > before) coverage.limitRaised += 1;
        if (before !== undefined && r.maxRuns < before) coverage.limitLowered += 1;
        this.limits.set(slot, r.maxRuns);
        const members = [...sim]
          .filter(([id, m]) => id !== t.id && m.rules.some((mr) => slotOf(mr.ruleId, mr.key) === slot))
          .sort(([a], [b]) => this.arrival.get(a)! - this.arrival.get(b)!);
        const running = members.filter(([, m]) => m.state === "active").map(([id]) => id);
        const queued = members.filter(([, m]) => m.state === "pending").map(([id]) => id);
        let doomed: string[] = [];
        switch (r.strategy) {
          case "GROUP_ROUND_ROBIN":
            break;
          case "CANCEL_NEWEST":
            if (running.length + queued.length >= r.maxRuns) doomed = [t.id];
            break;
          case "CANCEL_IN_PROGRESS": {
            const live = [...running, ...queued]; // running ones are cancelled first
            doomed = live.slice(0, Math.max(0, live.length + 1 - r.maxRuns));
            break;
          }
          case "CANCEL_QUEUED_EXCEPT_NEWEST":
          case "CANCEL_QUEUED_EXCEPT_OLDEST": {
            const waiting = [...queued, t.id];
            const backlog = waiting.slice(Math.max(0, r.maxRuns - running.length));
            const excess = backlog.length - r.maxRuns;
            if (excess > 0) doomed = r.strategy === "CANCEL_QUEUED_EXCEPT_NEWEST" ? backlog.slice(0, excess) : backlog.slice(backlog.length - excess);
            break;
          }
        }
        for (const id of doomed) {
          sim.delete(id);
          cancels.push(id);
          strategies.push(r.strategy);
        }
      }
      states.push(sim.has(t.id) ? state : "cancelled");
    }
    return { cancels, strategies, states };
  }

  private enqueue(items: ItemSpec[]): void {
    const tasks = items.map((it) => this.build(it));
    if (tasks.some((t) => t.rules.length > 1)) coverage.chains += 1;
    const wasActive = new Map([...this.rows].filter(([, e]) => e.state === "active").map(([id, e]) => [id, e.leaseId]));
    const expected = this.expectArrivals(tasks);

    const outcomes = this.core.enqueue(tasks, NO_KNOWN, this.nowMs, false);
    expect(outcomes.map((o) => (o.ok ? { ok: true, existed: o.existed, state: o.state } : { ok: false })), "enqueue outcomes")
      .toEqual(expected.states.map((state) => ({ ok: true, existed: false, state })));
    const logged = this.strategyCancelLog.length;
    const { events } = this.drainAndApply();

    // (d) exactly the model's strategy cancels, each with CONCURRENCY_LIMIT and one event.
    expect(this.strategyCancelLog.slice(logged), "strategy cancels (in order)").toEqual(expected.cancels);
    expect(events.filter((e) => e.kind === "cancelled"), "cancelled events")
      .toEqual(expected.strategies.map((strategy) => ({ kind: "cancelled", reason: "CONCURRENCY_LIMIT", strategy })));
    coverage.strategyCancels += expected.cancels.length;
    for (const [i, id] of expected.cancels.entries()) {
      if (tasks.some((t) => t.id === id)) coverage.newcomerCancelled += 1;
      else if (!wasActive.has(id) && expected.strategies[i] !== "CANCEL_IN_PROGRESS") coverage.queuedCancelled += 1;
      const leaseId = wasActive.get(id);
      if (leaseId === undefined) continue;
      // A preempted running task loses its lease at once.
      coverage.runningPreempted += 1;
      this.retireLease(leaseId);
      expect(this.core.heartbeat([leaseId], this.nowMs)[0]).toEqual({
        leaseId, held: false, cancelRequested: true, cancelReason: "CONCURRENCY_LIMIT", leaseExpiresAtMs: 0,
      });
      const [late] = this.core.settle([{ leaseId, taskId: id, outcome: "success" }], this.nowMs);
      expect(late?.reason, "a preempted task's late settle").toBe("LEASE_NOT_HELD");
      expect(this.core.drain().effects).toEqual([]);
    }
  }

  private lease(max: number): void {
    const before = new Map(this.rows);
    const plans = this.core.lease(max, this.nowMs);
    this.checkLease(plans, max, before);
  }

  private checkLease(plans: DeliveryPlan[], max: number, before: Map<string, TaskIndexEntry>): void {
    expect(plans.length).toBeLessThanOrEqual(max);
    const inflight = this.activeBySlot();
    const leased: TaskIndexEntry[] = [];
    for (const plan of plans) {
      expect(plan.taskIds).toHaveLength(1);
      const e = before.get(plan.taskIds[0]!);
      if (e?.state !== "pending") expect(e?.state, `leased task ${plan.taskIds[0]} was pending`).toBe("pending");
      leased.push(e!);
      // (a) no slot of a leased task already had its limit in flight.
      const limits = new Map<string, number>();
      for (const slot of this.slotsOf(e!)) {
        const n = inflight.get(slot) ?? 0;
        const limit = this.limitOf(slot);
        if (n >= limit) expect(n, `${e!.id} leased with ${n} in flight under ${slot.replace("\u0000", "/")} (limit ${limit})`).toBeLessThan(limit);
        inflight.set(slot, n + 1);
        limits.set(slot, limit);
      }
      this.dispatchLimits.set(e!.id, limits);
    }
    // Dispatch order within one call (ties of round-robin ranks are unordered).
    for (let i = 1; i < leased.length; i++) if (readyBefore(leased[i]!, leased[i - 1]!)) expect(leased.map((e) => [e.id, e.priority, e.seq]), "dispatch order").toBe("ordered");

    const { events } = this.drainAndApply();
    coverage.leases += plans.length;
    if (events.some((e) => e.kind === "throttled")) coverage.throttled += 1;
    const held = new Set([...this.leases.values()].map((l) => l.taskId));
    for (const plan of plans) {
      if (held.has(plan.taskIds[0]!)) expect(plan.taskIds[0], "a task in two live leases").toBe("");
      this.leases.set(plan.leaseId, { taskId: plan.taskIds[0]!, expiresAtMs: plan.leaseExpiresAtMs });
    }
    // (f) a short answer leaves no pending task whose every slot has room.
    if (plans.length < max) {
      const now = this.activeBySlot();
      for (const e of this.rows.values()) {
        if (e.state !== "pending") continue;
        const slots = this.slotsOf(e);
        if (!this.profile.stallCheckAll && slots.length > 1) continue;
        coverage.stallChecks += 1;
        const blocked = slots.some((s) => (now.get(s) ?? 0) >= this.limitOf(s));
        if (!blocked) expect(blocked, `stall: pending ${e.id} was not dispatched although all of its slots have room`).toBe(true);
      }
    }
  }

  private settle(p: number, outcome: Outcome, stale: boolean): void {
    const live = [...this.leases.keys()].sort();
    if (stale || live.length === 0) {
      const leaseId = this.deadLeases.length > 0 ? this.deadLeases[p % this.deadLeases.length]! : "never-issued";
      const ids = [...this.inserted];
      const taskId = ids.length > 0 ? ids[p % ids.length]! : "none";
      const [error] = this.core.settle([{ leaseId, taskId, outcome }], this.nowMs);
      expect(error?.reason).toBe("LEASE_NOT_HELD");
      expect(this.core.drain().effects).toEqual([]);
      return;
    }
    const leaseId = live[p % live.length]!;
    const { taskId } = this.leases.get(leaseId)!;
    const before = { ...this.rows.get(taskId)! };
    expect(this.core.settle([{ leaseId, taskId, outcome, error: "e" }], this.nowMs)).toEqual([null]);
    this.retireLease(leaseId);
    this.drainAndApply();
    const after = this.rows.get(taskId);
    switch (outcome) {
      case "success":
        expect(this.finished.get(taskId)?.state).toBe("completed");
        break;
      case "skip_retry":
        expect(this.finished.get(taskId)?.state).toBe("archived");
        break;
      case "released":
        expect(after).toMatchObject({ state: "pending", seq: before.seq, leaseId: "" });
        break;
      case "retry":
        if (before.retried >= before.maxRetry) expect(this.finished.get(taskId)?.state).toBe("archived");
        else {
          coverage.retries += 1;
          expect(after).toMatchObject({ state: "retry", retried: before.retried + 1, leaseId: "" });
        }
        break;
    }
  }

  private advance(ms: number): void {
    this.nowMs += ms;
    const lapsing = [...this.leases].filter(([, l]) => l.expiresAtMs <= this.nowMs);
    this.core.tick(this.nowMs);
    const { events } = this.drainAndApply();
    const expired = events.filter((e): e is Extract<CoreEvent, { kind: "lease_expired" }> => e.kind === "lease_expired");
    expect(expired.map((e) => e.leaseId).sort()).toEqual(lapsing.map(([id]) => id).sort());
    coverage.leaseExpired += lapsing.length;
    for (const [leaseId] of lapsing) this.retireLease(leaseId);
  }

  private heartbeat(p: number): void {
    const live = [...this.leases.keys()].sort();
    if (live.length === 0) return;
    const leaseId = live[p % live.length]!;
    expect(this.core.heartbeat([leaseId], this.nowMs)[0]).toMatchObject({ leaseId, held: true, leaseExpiresAtMs: this.nowMs + TTL });
    this.leases.get(leaseId)!.expiresAtMs = this.nowMs + TTL;
  }

  private cancel(p: number): void {
    const candidates = [...this.rows.keys()].sort();
    if (candidates.length === 0) return;
    const id = candidates[p % candidates.length]!;
    const was = this.rows.get(id)!;
    expect(this.core.cancel(id, "OPERATOR", this.nowMs)).toBeNull();
    this.drainAndApply();
    coverage.operatorCancels += 1;
    expect(this.finished.get(id)).toEqual({ state: "cancelled", cancelReason: "OPERATOR" });
    if (was.state === "active") {
      this.retireLease(was.leaseId);
      expect(this.core.heartbeat([was.leaseId], this.nowMs)[0]).toMatchObject({ held: false, cancelRequested: true, cancelReason: "OPERATOR" });
    }
  }

  /** (e) Rebuilds the core from storage (rows in seq order); the next lease must match the old core's. */
  private passivate(max: number): void {
    const old = this.core;
    const fresh = this.newCore();
    const rows = [...this.rows.values()]; // arrival order, as the store loads them (ORDER BY rowid)
    fresh.load(rows, { paused: false, keyLimit: this.schema.keyLimit, slotLimits: this.slotLimits }, this.nowMs);
    expect(fresh.drain().effects).toEqual([]);
    for (const [rule, key] of SLOTS) {
      expect(fresh.inflightOfRule(rule, key), `passivation: in flight under ${rule}/${key}`).toBe(old.inflightOfRule(rule, key));
    }
    const { held: _h1, timers: _t1, ...oldStats } = old.stats();
    const { held: _h2, timers: _t2, ...freshStats } = fresh.stats();
    expect(freshStats, "passivation: stats").toEqual(oldStats);
    expect(fresh.snapshot().map(withoutLeaseExpiry).sort(byId), "passivation: index").toEqual(old.snapshot().map(withoutLeaseExpiry).sort(byId));

    const oldPlans = old.lease(max, this.nowMs);
    old.drain(); // the old core is gone; its decisions are never stored
    this.core = fresh;
    for (const l of this.leases.values()) l.expiresAtMs = Math.max(l.expiresAtMs, this.nowMs + TTL);
    const before = new Map(this.rows);
    const plans = fresh.lease(max, this.nowMs);
    // Tasks of equal priority and rank are unordered: compare positions in the dispatch order.
    const order = (ps: DeliveryPlan[]) => ps.map((p) => { const e = before.get(p.taskIds[0]!)!; return [e.priority, e.seq]; });
    expect(order(plans), "passivation: the next lease differs from the old core's").toEqual(order(oldPlans));
    if (plans.length > 0) coverage.passivationsWithLeases += 1;
    if (this.leases.size > 0) coverage.passivationsWithActive += 1;
    this.checkLease(plans, max, before);
  }

  // -- model upkeep --

  private retireLease(leaseId: string): void {
    const lease = this.leases.get(leaseId);
    expect(lease, `lease ${leaseId} was live`).toBeDefined();
    this.leases.delete(leaseId);
    this.dispatchLimits.delete(lease!.taskId);
    this.deadLeases.push(leaseId);
  }

  /** Applies the turn's effects to storage, as the shell would. */
  private drainAndApply(): { effects: Effect[]; events: CoreEvent[] } {
    const { effects, events } = this.core.drain();
    for (const eff of effects) {
      switch (eff.kind) {
        case "insert":
          if (this.inserted.has(eff.task.id)) expect(eff.task.id, "inserted twice").toBe("");
          this.inserted.add(eff.task.id);
          this.rows.set(eff.task.id, { ...eff.entry });
          break;
        case "activate": case "complete": case "retry": case "requeue": case "release":
        case "promote": case "fireGroup": case "revive": case "archive": case "cancel": {
          expect(isStateTransition(eff)).toBe(true);
          const id = eff.entry.id;
          // (c) a task transitions only while unfinished: one final transition, never two.
          if (!this.rows.has(id)) expect(id, "a transition of a task that is not an unfinished row (finished twice?)").toBe("");
          if (FINISHED_STATES.has(eff.entry.state)) {
            this.rows.delete(id);
            const cancelReason = outcomeOf(eff)?.cancelReason ?? "";
            this.finished.set(id, { state: eff.entry.state, cancelReason });
            if (cancelReason === "CONCURRENCY_LIMIT") {
              if (eff.entry.state !== "cancelled") expect(eff.entry.state).toBe("cancelled");
              this.strategyCancelLog.push(id);
            }
          } else {
            this.rows.set(id, { ...eff.entry });
          }
          break;
        }
        case "delete":
          throw new Error(`unexpected delete of ${eff.id}`);
        case "setPaused":
          throw new Error("unexpected paused effect");
        case "setSlotLimit":
          if (eff.slot.startsWith("@")) break;
          if (eff.limit === undefined) this.slotLimits.delete(eff.slot);
          else this.slotLimits.set(eff.slot, eff.limit);
          break;
      }
    }
    return { effects, events };
  }

  /** After every step: memory, storage and model agree; slots are within their limits. */
  checkInvariants(): void {
    // Plain comparisons first (this runs after every command); `expect` only reports.
    const snap = this.core.snapshot();
    const memory = new Map(snap.map((e) => [e.id, JSON.stringify(withoutLeaseExpiry(e))]));
    // (c) every task is exactly once either unfinished (memory = stored row) or finished.
    const diverged = [...this.rows].filter(([id, row]) => memory.get(id) !== JSON.stringify(withoutLeaseExpiry(row))).map(([id]) => id);
    if (memory.size !== snap.length || memory.size !== this.rows.size || diverged.length > 0) {
      expect([...memory.keys()].sort(), "unfinished tasks in memory = stored rows").toEqual([...this.rows.keys()].sort());
      expect(diverged, "rows that differ from memory").toEqual([]);
    }
    const misplaced = [...this.inserted].filter((id) => this.rows.has(id) === this.finished.has(id));
    if (misplaced.length > 0 || this.rows.size + this.finished.size !== this.inserted.size) {
      expect(misplaced, "tasks not in exactly one place").toEqual([]);
      expect(this.rows.size + this.finished.size).toBe(this.inserted.size);
    }
    // (d) every CONCURRENCY_LIMIT cancel is a strategy's, logged once.
    if (new Set(this.strategyCancelLog).size !== this.strategyCancelLog.length) expect(this.strategyCancelLog, "strategy cancels logged once").toEqual([...new Set(this.strategyCancelLog)]);

    // Leases: one per running task, exactly the model's.
    const activeLeases: string[] = [];
    for (const e of snap) {
      if (e.state === "active") activeLeases.push(`${e.leaseId}:${e.id}`);
      else if (e.leaseId !== "") expect(e.leaseId, `${e.id} (${e.state}) has no lease`).toBe("");
    }
    const modelLeases = [...this.leases].map(([id, l]) => `${id}:${l.taskId}`);
    if (activeLeases.sort().join() !== modelLeases.sort().join()) expect(activeLeases, "leases").toEqual(modelLeases);

    // (b) in-flight counts match the running tasks and stay within the dispatch-time limits.
    const active = this.activeBySlot();
    const allowed = new Map<string, number>();
    for (const e of this.rows.values()) {
      if (e.state !== "active") continue;
      for (const [slot, limit] of this.dispatchLimits.get(e.id) ?? []) allowed.set(slot, Math.max(allowed.get(slot) ?? 0, limit));
    }
    for (const [rule, key] of SLOTS) {
      const slot = slotOf(rule, key);
      const n = active.get(slot) ?? 0;
      const core = rule === QUEUE_RULE ? this.core.inflightOfKey(key) : this.core.inflightOfRule(rule, key);
      if (core !== n) expect(core, `in flight under ${rule}/${key}`).toBe(n);
      if (n === 0) continue;
      if (n > (allowed.get(slot) ?? 0)) expect(n, `in flight under ${rule}/${key}, dispatched under limits ≤ ${allowed.get(slot)}`).toBeLessThanOrEqual(allowed.get(slot) ?? 0);
      if (rule !== QUEUE_RULE && n > this.limits.get(slot)!) coverage.overLimitAfterLower += 1;
    }
  }
}

function property(profile: Profile, maxCommands: number) {
  const cmds = fc.array(cmdArb(profile), { minLength: 5, maxLength: maxCommands, size: "max" });
  return fc.property(fc.integer({ min: 1, max: 1_000_000 }), schemaArb(profile), cmds, (seed, schema, commands) => {
    const runner = new Runner(seed, schema, profile);
    for (const cmd of commands) {
      runner.run(cmd);
      runner.checkInvariants();
    }
  });
}

describe("concurrency strategy properties (random command sequences)", () => {
  it("chains, dynamic limits, retries and cancels: limits hold at every lease; cancels are the model's; every task ends once; nothing stalls", () => {
    resetCoverage();
    fc.assert(property(CHAINS, 40), { seed: 20_250_105, numRuns: 80 });
    // The generated runs really went through the interesting situations (floors ≈ 60% of what seed gives).
    const floors: Partial<Record<CoverageKey, number>> = {
      leases: 250, throttled: 35, strategyCancels: 100, runningPreempted: 15, newcomerCancelled: 50, queuedCancelled: 8,
      limitRaised: 150, limitLowered: 150, overLimitAfterLower: 10, stallChecks: 100, leaseExpired: 40, retries: 12, chains: 150, operatorCancels: 40,
    };
    for (const [what, floor] of Object.entries(floors)) expect(coverage[what as CoverageKey], `coverage of ${what}`).toBeGreaterThanOrEqual(floor);
  });

  it("single rules with static limits: passivation is invisible and nothing stalls", () => {
    resetCoverage();
    fc.assert(property(PASSIVATION, 40), { seed: 4_242, numRuns: 80 });
    const floors: Partial<Record<CoverageKey, number>> = {
      leases: 300, throttled: 20, strategyCancels: 60, runningPreempted: 8, queuedCancelled: 8, passivationsWithActive: 55,
      passivationsWithLeases: 50, stallChecks: 30, leaseExpired: 35,
    };
    for (const [what, floor] of Object.entries(floors)) expect(coverage[what as CoverageKey], `coverage of ${what}`).toBeGreaterThanOrEqual(floor);
  });

  it("two round-robin rules per task, limit 1 everywhere: no held task stalls while all its slots have room", () => {
    // Where a task woken for one slot but re-held on another used to strand the first slot.
    resetCoverage();
    fc.assert(property(TIGHT_CHAINS, 40), { seed: 20_250_105, numRuns: 60 });
    expect(coverage.stallChecks, "coverage of stallChecks").toBeGreaterThanOrEqual(500);
    expect(coverage.throttled, "coverage of throttled").toBeGreaterThanOrEqual(70);
  });

  it("with dynamic limits too, passivation is invisible (limits are stored, not recomputed from the rows)", () => {
    fc.assert(property({ ...PASSIVATION, dynamicLimits: true }, 40), { seed: 4_242, numRuns: 80 });
  });

  it("chains, dynamic limits, queue keys, schedules and retries: passivation is invisible", () => {
    fc.assert(property({ ...CHAINS, weights: { ...CHAINS.weights, passivate: 2 } }, 40), { seed: 77, numRuns: 60 });
  });
});
