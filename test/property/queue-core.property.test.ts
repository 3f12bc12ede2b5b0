/**
 * Model-checked random command sequences against the pure queue core.
 *
 * A runner applies each generated command to the core and mirrors every drained effect
 * into a "storage" model (rows of unfinished tasks, the set of finished ones, the live
 * leases). After every step it checks that memory, effects and model agree, and each
 * command checks its own post-conditions (per-key limit at lease time, dispatch order,
 * no stalled work, retry/backoff shape, lease expiry, attempt timeouts and deadlines
 * ending leases, unique keys, idempotent ids).
 * "passivate" rebuilds the core from the storage rows and runs the next lease on the
 * old and the new core side by side: they must hand out the same tasks in the same order.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import type { CoreEvent, Effect } from "../../src/grains/queue/effects.js";
import { QueueCore, type DeliveryPlan, type KnownIds } from "../../src/grains/queue/queue-core.js";
import { FINISHED_STATES, type NewTask, type Outcome, type TaskIndexEntry, type TaskState } from "../../src/grains/queue/task.js";
import { QUEUE, coreConfig, isStateTransition, newTask } from "../support/core-fixtures.js";

const TTL = 1_000;
const KEYS = ["", "A", "B", "C"] as const;
const BACKOFF_BASE = 100;
const BACKOFF_MAX = 1_000;

// ---- commands ----------------------------------------------------------------------

interface ItemSpec {
  priority: number;
  key: string;
  processInMs: number;
  uniqueKey: string;
  chosenId: string;
  maxRetry: number;
  /** Per-attempt timeout; 0 = none. */
  timeoutMs: number;
  /** Deadline relative to the enqueue; 0 = none. */
  deadlineInMs: number;
}

type Cmd =
  | { kind: "enqueue"; items: ItemSpec[]; atomic: boolean }
  | { kind: "lease"; max: number }
  | { kind: "settle"; pick: number; outcome: Outcome; stale: boolean }
  | { kind: "advance"; ms: number }
  | { kind: "heartbeat"; pick: number }
  | { kind: "keyLimit"; limit: number | undefined }
  | { kind: "cancel"; pick: number }
  | { kind: "pause"; paused: boolean }
  | { kind: "runNow"; pick: number }
  | { kind: "passivate"; max: number };

/** A generator profile: which keys items use and how often each command comes up. */
interface Profile {
  keys: readonly string[];
  weights: Record<Cmd["kind"], number>;
}

const BALANCED: Profile = {
  keys: KEYS,
  weights: { enqueue: 5, lease: 4, settle: 4, advance: 2, heartbeat: 1, keyLimit: 1, cancel: 1, pause: 1, runNow: 1, passivate: 1 },
};

/** One hot key, lots of cancels: where a lost key slot shows up quickly. */
const HOT_KEY: Profile = {
  keys: ["A", "A", ""],
  weights: { enqueue: 4, lease: 4, settle: 4, advance: 1, heartbeat: 0, keyLimit: 0, cancel: 3, pause: 0, runNow: 0, passivate: 1 },
};

const itemArb = (keys: readonly string[]): fc.Arbitrary<ItemSpec> => fc.record({
  priority: fc.oneof(fc.constantFrom(1, 4, 9), fc.integer({ min: 1, max: 9 })),
  key: fc.constantFrom(...keys),
  processInMs: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 2_000 }) }),
  uniqueKey: fc.oneof({ weight: 4, arbitrary: fc.constant("") }, { weight: 1, arbitrary: fc.constantFrom("u1", "u2") }),
  chosenId: fc.oneof({ weight: 4, arbitrary: fc.constant("") }, { weight: 1, arbitrary: fc.constantFrom("c1", "c2", "c3") }),
  maxRetry: fc.integer({ min: 0, max: 2 }),
  timeoutMs: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 100, max: 1_500 }) }),
  deadlineInMs: fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 100, max: 4_000 }) }),
});

const pick = fc.nat({ max: 1_000 });

function cmdArb({ keys, weights: w }: Profile): fc.Arbitrary<Cmd> {
  const all: fc.WeightedArbitrary<Cmd>[] = [
    { weight: w.enqueue, arbitrary: fc.record({ kind: fc.constant("enqueue" as const), items: fc.array(itemArb(keys), { minLength: 1, maxLength: 3 }), atomic: fc.boolean() }) },
    { weight: w.lease, arbitrary: fc.record({ kind: fc.constant("lease" as const), max: fc.integer({ min: 1, max: 4 }) }) },
    {
      weight: w.settle,
      arbitrary: fc.record({
        kind: fc.constant("settle" as const),
        pick,
        outcome: fc.constantFrom<Outcome>("success", "retry", "skip_retry", "released"),
        stale: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      }),
    },
    { weight: w.advance, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.oneof(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 400, max: 1_600 })) }) },
    { weight: w.heartbeat, arbitrary: fc.record({ kind: fc.constant("heartbeat" as const), pick }) },
    { weight: w.keyLimit, arbitrary: fc.record({ kind: fc.constant("keyLimit" as const), limit: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }) }) },
    { weight: w.cancel, arbitrary: fc.record({ kind: fc.constant("cancel" as const), pick }) },
    // Resumes come three times as often as pauses, so the queue is mostly running.
    { weight: w.pause, arbitrary: fc.record({ kind: fc.constant("pause" as const), paused: fc.oneof({ weight: 1, arbitrary: fc.constant(true) }, { weight: 3, arbitrary: fc.constant(false) }) }) },
    { weight: w.runNow, arbitrary: fc.record({ kind: fc.constant("runNow" as const), pick }) },
    { weight: w.passivate, arbitrary: fc.record({ kind: fc.constant("passivate" as const), max: fc.integer({ min: 0, max: 4 }) }) },
  ];
  return fc.oneof(...all.filter((a) => a.weight > 0));
}

// ---- the runner ----------------------------------------------------------------------

interface RunOptions {
  /** Allow cancelling pending tasks that have a concurrency key (once lost a key slot; fixed). */
  cancelPendingKeyed: boolean;
  profile: Profile;
}

const readyBefore = (a: TaskIndexEntry, b: TaskIndexEntry) =>
  a.priority !== b.priority ? a.priority > b.priority : a.seq < b.seq;

const withoutLeaseExpiry = ({ leaseExpiresAtMs: _, ...rest }: TaskIndexEntry) => rest;

/** The earlier of two instants where 0 means "none". */
const earliest = (a: number, b: number) => (a === 0 ? b : b === 0 ? a : Math.min(a, b));

/** How often interesting situations came up, to keep the property from being vacuous. */
const coverage = {
  leases: 0, throttled: 0, leaseExpired: 0, expiredToArchive: 0, retries: 0, released: 0,
  passivationsWithLeases: 0, passivationsWithActive: 0, cancelsActive: 0, uniqueConflicts: 0, existed: 0,
  shortLeaseWithPending: 0, promotions: 0, attemptTimeouts: 0, timeoutsToArchive: 0, timeoutsBeforeLapse: 0,
};

class Runner {
  core: QueueCore;
  nowMs = 1_000_000;
  paused = false;
  limit: number | undefined = undefined;
  /** Storage: unfinished rows, as the effects left them. */
  readonly rows = new Map<string, TaskIndexEntry>();
  readonly finished = new Map<string, TaskState>();
  readonly inserted = new Set<string>();
  /** Live leases (one task each), when the model expects them to lapse, and when their attempt ends (0 = never). */
  readonly leases = new Map<string, { taskId: string; expiresAtMs: number; endsAtMs: number }>();
  readonly deadLeases: string[] = [];
  private taskNo = 0;
  private leaseNo = 0;
  private coreNo = 0;

  constructor(private readonly seed: number, private readonly options: RunOptions) {
    this.core = this.newCore();
  }

  private newCore(): QueueCore {
    this.coreNo += 1;
    return new QueueCore(QUEUE, coreConfig(TTL), {
      random: seededRandom(this.seed * 31 + this.coreNo),
      newId: () => `L${++this.leaseNo}`,
    });
  }

  run(cmd: Cmd): void {
    switch (cmd.kind) {
      case "enqueue": return this.enqueue(cmd.items, cmd.atomic);
      case "lease": return this.lease(cmd.max);
      case "settle": return this.settle(cmd.pick, cmd.outcome, cmd.stale);
      case "advance": return this.advance(cmd.ms);
      case "heartbeat": return this.heartbeat(cmd.pick);
      case "keyLimit": return this.setKeyLimit(cmd.limit);
      case "cancel": return this.cancel(cmd.pick);
      case "pause": return this.pause(cmd.paused);
      case "runNow": return this.runNow(cmd.pick);
      case "passivate": return this.passivate(cmd.max);
    }
  }

  // -- commands --

  private enqueue(items: ItemSpec[], atomic: boolean): void {
    const batchIds = new Set<string>();
    const tasks: NewTask[] = items.map((it) => {
      const chosen = it.chosenId !== "" && !batchIds.has(it.chosenId);
      if (chosen) batchIds.add(it.chosenId);
      return newTask({
        id: chosen ? it.chosenId : `t${++this.taskNo}`,
        idChosen: chosen,
        priority: it.priority,
        concurrencyKey: it.key,
        processAtMs: it.processInMs > 0 ? this.nowMs + it.processInMs : 0,
        uniqueKey: it.uniqueKey,
        maxRetry: it.maxRetry,
        timeoutMs: it.timeoutMs,
        deadlineAtMs: it.deadlineInMs > 0 ? this.nowMs + it.deadlineInMs : 0,
        backoffBaseMs: BACKOFF_BASE,
        backoffMaxMs: BACKOFF_MAX,
      });
    });

    // What the core must answer.
    const heldKeys = new Set([...this.rows.values()].map((e) => e.uniqueKey).filter((k) => k !== ""));
    const expected = tasks.map((t) => {
      if (t.idChosen) {
        const live = this.rows.get(t.id);
        if (live) return { ok: true, existed: true, state: live.state };
        const done = this.finished.get(t.id);
        if (done) return { ok: true, existed: true, state: done };
      }
      if (t.uniqueKey && heldKeys.has(t.uniqueKey)) return { ok: false, reason: "UNIQUE_KEY_CONFLICT" };
      if (t.uniqueKey) heldKeys.add(t.uniqueKey);
      return { ok: true, existed: false, state: t.processAtMs > this.nowMs ? "scheduled" : "pending" };
    });
    const known: KnownIds = new Map(
      tasks.filter((t) => t.idChosen && this.finished.has(t.id)).map((t) => [t.id, { queue: QUEUE, state: this.finished.get(t.id)! }]),
    );

    const outcomes = this.core.enqueue(tasks, known, this.nowMs, atomic);
    coverage.uniqueConflicts += expected.filter((e) => !e.ok).length;
    coverage.existed += expected.filter((e) => e.ok && e.existed).length;
    expect(outcomes.map((o) => (o.ok ? { ok: true, existed: o.existed, state: o.state } : { ok: false, reason: o.error.reason })))
      .toEqual(expected);
    const admitted = atomic && expected.some((e) => !e.ok) ? [] : tasks.filter((_, i) => expected[i]!.ok && !expected[i]!.existed);

    const { effects } = this.drainAndApply();
    expect(effects.map((e) => e.kind === "insert" && e.task.id)).toEqual(admitted.map((t) => t.id));
  }

  private lease(max: number): void {
    const before = new Map(this.rows);
    const activeByKey = this.activeByKey();
    const plans = this.core.lease(max, this.nowMs);
    this.checkLease(plans, max, before, activeByKey);
  }

  private checkLease(plans: DeliveryPlan[], max: number, before: Map<string, TaskIndexEntry>, activeByKey: Map<string, number>): void {
    if (this.paused) expect(plans).toEqual([]);
    expect(plans.length).toBeLessThanOrEqual(max);
    const leased: TaskIndexEntry[] = [];
    for (const plan of plans) {
      expect(plan.taskIds).toHaveLength(1);
      expect(plan.leaseExpiresAtMs).toBe(this.nowMs + TTL);
      expect(this.leases.has(plan.leaseId)).toBe(false);
      const e = before.get(plan.taskIds[0]!);
      expect(e?.state, `leased task ${plan.taskIds[0]} was pending`).toBe("pending");
      // The attempt ends at the earlier of its deadline and now + its timeout.
      expect(plan.deadlineAtMs).toBe(earliest(e!.deadlineAtMs, e!.timeoutMs > 0 ? this.nowMs + e!.timeoutMs : 0));
      leased.push(e!);
      // (1) a lease never hands out a task whose key is already at the limit.
      if (e!.concurrencyKey !== "" && this.limit !== undefined) {
        const n = activeByKey.get(e!.concurrencyKey) ?? 0;
        expect(n, `key ${e!.concurrencyKey} below limit ${this.limit} when leasing ${e!.id}`).toBeLessThan(this.limit);
        activeByKey.set(e!.concurrencyKey, n + 1);
      }
    }
    // One lease call hands out tasks in dispatch order.
    for (let i = 1; i < leased.length; i++) expect(readyBefore(leased[i - 1]!, leased[i]!)).toBe(true);

    const { events } = this.drainAndApply();
    coverage.leases += plans.length;
    if (events.some((e) => e.kind === "throttled")) coverage.throttled += 1;
    for (const plan of plans) {
      // (2) no task is in two live leases.
      for (const l of this.leases.values()) expect(l.taskId).not.toBe(plan.taskIds[0]);
      this.leases.set(plan.leaseId, { taskId: plan.taskIds[0]!, expiresAtMs: plan.leaseExpiresAtMs, endsAtMs: plan.deadlineAtMs });
    }
    // Nothing dispatchable is left behind: a short answer means every pending task is
    // waiting for a slot of its saturated key.
    if (!this.paused && plans.length < max) {
      if ([...this.rows.values()].some((e) => e.state === "pending")) coverage.shortLeaseWithPending += 1;
      for (const e of this.rows.values()) {
        if (e.state !== "pending") continue;
        const saturated = e.concurrencyKey !== "" && this.limit !== undefined && this.core.inflightOfKey(e.concurrencyKey) >= this.limit;
        expect(saturated, `pending ${e.id} (key "${e.concurrencyKey}") was not dispatched although its key has room`).toBe(true);
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
    const result = new Uint8Array([p % 256]);
    expect(this.core.settle([{ leaseId, taskId, outcome, result, error: "e" }], this.nowMs)).toEqual([null]);
    this.retireLease(leaseId);
    this.drainAndApply();

    const after = this.rows.get(taskId);
    switch (outcome) {
      case "success":
        expect(this.finished.get(taskId)).toBe("completed");
        break;
      case "skip_retry":
        expect(this.finished.get(taskId)).toBe("archived");
        break;
      case "released":
        coverage.released += 1;
        expect(after).toMatchObject({ state: "pending", seq: before.seq, retried: before.retried, leaseId: "" });
        break;
      case "retry":
        if (before.retried >= before.maxRetry) {
          expect(this.finished.get(taskId)).toBe("archived");
        } else {
          coverage.retries += 1;
          expect(after).toMatchObject({ state: "retry", retried: before.retried + 1, leaseId: "" });
          const cap = Math.min(BACKOFF_MAX, BACKOFF_BASE * 2 ** before.retried);
          const delay = after!.readyAtMs - this.nowMs;
          expect(delay).toBeGreaterThanOrEqual(cap / 2);
          expect(delay).toBeLessThanOrEqual(cap);
        }
        break;
    }
  }

  private advance(ms: number): void {
    this.nowMs += ms;
    const before = new Map(this.rows);
    // A lease ends at the earlier of its attempt's end (timeout or deadline: a failure
    // that backs off) and its lapse (no heartbeat: back to its place).
    const timingOut: [string, { taskId: string }][] = [];
    const lapsing: [string, { taskId: string }][] = [];
    for (const [id, l] of this.leases) {
      const timedOut = l.endsAtMs > 0 && l.endsAtMs <= this.nowMs;
      const lapsed = l.expiresAtMs <= this.nowMs;
      if (timedOut && (!lapsed || l.endsAtMs <= l.expiresAtMs)) timingOut.push([id, l]);
      else if (lapsed) lapsing.push([id, l]);
      if (timedOut && l.expiresAtMs > this.nowMs) coverage.timeoutsBeforeLapse += 1;
    }
    this.core.tick(this.nowMs);
    const { events } = this.drainAndApply();
    const expired = events.filter((e): e is Extract<CoreEvent, { kind: "lease_expired" }> => e.kind === "lease_expired");
    expect(expired.map((e) => e.leaseId).sort()).toEqual(lapsing.map(([id]) => id).sort());
    const timedOut = events.filter((e): e is Extract<CoreEvent, { kind: "attempt_timed_out" }> => e.kind === "attempt_timed_out");
    expect(timedOut.map((e) => e.leaseId).sort()).toEqual(timingOut.map(([id]) => id).sort());
    coverage.leaseExpired += lapsing.length;
    coverage.attemptTimeouts += timingOut.length;
    coverage.promotions += [...before.values()].filter((e) => (e.state === "scheduled" || e.state === "retry") && this.rows.get(e.id)?.state === "pending").length;
    const pastDeadline = (e: TaskIndexEntry) => e.deadlineAtMs > 0 && e.deadlineAtMs <= this.nowMs;
    for (const [leaseId, { taskId }] of lapsing) {
      const was = before.get(taskId)!;
      if (was.retried >= was.maxRetry || pastDeadline(was)) {
        coverage.expiredToArchive += 1;
        expect(this.finished.get(taskId)).toBe("archived");
      } else {
        // Back to pending at once, same place, one more failure.
        expect(this.rows.get(taskId)).toMatchObject({ state: "pending", seq: was.seq, retried: was.retried + 1 });
      }
      this.retireLease(leaseId);
    }
    for (const [leaseId, { taskId }] of timingOut) {
      const was = before.get(taskId)!;
      if (was.retried >= was.maxRetry || pastDeadline(was)) {
        coverage.timeoutsToArchive += 1;
        expect(this.finished.get(taskId)).toBe("archived");
      } else {
        // A failed attempt: one more failure, and a backoff like a RETRY.
        const after = this.rows.get(taskId)!;
        expect(after).toMatchObject({ state: "retry", retried: was.retried + 1, leaseId: "", attemptEndsAtMs: 0 });
        const cap = Math.min(BACKOFF_MAX, BACKOFF_BASE * 2 ** was.retried);
        expect(after.readyAtMs - this.nowMs).toBeGreaterThanOrEqual(cap / 2);
        expect(after.readyAtMs - this.nowMs).toBeLessThanOrEqual(cap);
      }
      this.retireLease(leaseId);
    }
    for (const e of this.rows.values()) {
      if (e.state === "scheduled" || e.state === "retry") expect(e.readyAtMs).toBeGreaterThan(this.nowMs);
    }
  }

  private heartbeat(p: number): void {
    const live = [...this.leases.keys()].sort();
    if (live.length === 0 || p % 4 === 0) {
      const id = this.deadLeases.length > 0 ? this.deadLeases[p % this.deadLeases.length]! : "never-issued";
      expect(this.core.heartbeat([id], this.nowMs)[0]).toMatchObject({ leaseId: id, held: false, leaseExpiresAtMs: 0 });
      return;
    }
    const leaseId = live[p % live.length]!;
    expect(this.core.heartbeat([leaseId], this.nowMs)).toEqual([
      { leaseId, held: true, cancelRequested: false, cancelReason: "", leaseExpiresAtMs: this.nowMs + TTL },
    ]);
    this.leases.get(leaseId)!.expiresAtMs = this.nowMs + TTL;
    expect(this.core.drain().effects).toEqual([]); // heartbeats are not persisted
  }

  private setKeyLimit(limit: number | undefined): void {
    this.core.setKeyLimit(limit, this.nowMs);
    this.limit = limit;
    this.drainAndApply();
  }

  private cancel(p: number): void {
    const candidates = [...this.rows.values()]
      .filter((e) => this.options.cancelPendingKeyed || !(e.state === "pending" && e.concurrencyKey !== ""))
      .map((e) => e.id)
      .sort();
    if (candidates.length === 0) return;
    const id = candidates[p % candidates.length]!;
    const was = this.rows.get(id)!;
    expect(this.core.cancel(id, "OPERATOR", this.nowMs)).toBeNull();
    this.drainAndApply();
    expect(this.finished.get(id)).toBe("cancelled");
    if (was.state === "active") {
      coverage.cancelsActive += 1;
      this.retireLease(was.leaseId);
      expect(this.core.heartbeat([was.leaseId], this.nowMs)[0]).toEqual({
        leaseId: was.leaseId, held: false, cancelRequested: true, cancelReason: "OPERATOR", leaseExpiresAtMs: 0,
      });
    }
  }

  private pause(paused: boolean): void {
    this.core.setPaused(paused, this.nowMs);
    const changed = this.paused !== paused;
    this.paused = paused;
    const { effects } = this.drainAndApply();
    expect(effects).toEqual(changed ? [{ kind: "setPaused", paused, atMs: this.nowMs }] : []);
  }

  private runNow(p: number): void {
    const waiting = [...this.rows.values()].filter((e) => e.state === "scheduled" || e.state === "retry").map((e) => e.id).sort();
    if (waiting.length === 0) return;
    const id = waiting[p % waiting.length]!;
    const maxSeq = Math.max(0, ...[...this.rows.values()].map((e) => e.seq));
    expect(this.core.runNow(id)).toBeNull();
    this.drainAndApply();
    const e = this.rows.get(id)!;
    expect(e.state).toBe("pending");
    expect(e.seq).toBeGreaterThan(maxSeq); // behind everything already queued
  }

  /** Rebuilds the core from storage; the next lease must match the old core's. */
  private passivate(max: number): void {
    const old = this.core;
    const fresh = this.newCore();
    fresh.load([...this.rows.values()], { paused: this.paused, ...(this.limit !== undefined ? { keyLimit: this.limit } : {}) }, this.nowMs);
    expect(fresh.drain().effects).toEqual([]);

    for (const key of KEYS) expect(fresh.inflightOfKey(key), `inflight of "${key}"`).toBe(old.inflightOfKey(key));
    const { held: _h1, timers: _t1, ...oldStats } = old.stats();
    const { held: _h2, timers: _t2, ...freshStats } = fresh.stats();
    expect(freshStats).toEqual(oldStats);
    expect(fresh.keyLimit).toBe(old.keyLimit);
    expect(fresh.paused).toBe(old.paused);
    expect(fresh.snapshot().map(withoutLeaseExpiry).sort(byId)).toEqual(old.snapshot().map(withoutLeaseExpiry).sort(byId));

    // (4) the old core and the rebuilt one hand out the same tasks, in the same order.
    const oldPlans = old.lease(max, this.nowMs);
    old.drain(); // the old core is gone; its decisions are never stored

    this.core = fresh;
    for (const l of this.leases.values()) l.expiresAtMs = Math.max(l.expiresAtMs, this.nowMs + TTL); // a full TTL from load
    const before = new Map(this.rows);
    const activeByKey = this.activeByKey();
    const plans = fresh.lease(max, this.nowMs);
    expect(plans.map((p) => [p.taskIds, p.deadlineAtMs, p.leaseExpiresAtMs])).toEqual(
      oldPlans.map((p) => [p.taskIds, p.deadlineAtMs, p.leaseExpiresAtMs]),
    );
    if (plans.length > 0) coverage.passivationsWithLeases += 1;
    if (this.leases.size > 0) coverage.passivationsWithActive += 1;
    this.checkLease(plans, max, before, activeByKey);
  }

  // -- model upkeep --

  private retireLease(leaseId: string): void {
    expect(this.leases.delete(leaseId)).toBe(true);
    this.deadLeases.push(leaseId);
  }

  private activeByKey(): Map<string, number> {
    const m = new Map<string, number>();
    for (const e of this.rows.values()) if (e.state === "active") m.set(e.concurrencyKey, (m.get(e.concurrencyKey) ?? 0) + 1);
    return m;
  }

  /** Applies the turn's effects to storage, as the shell would. */
  private drainAndApply(): { effects: Effect[]; events: CoreEvent[] } {
    const { effects, events } = this.core.drain();
    for (const eff of effects) {
      switch (eff.kind) {
        case "insert":
          expect(this.inserted.has(eff.task.id), `${eff.task.id} inserted twice`).toBe(false);
          this.inserted.add(eff.task.id);
          expect(eff.entry.id).toBe(eff.task.id);
          this.rows.set(eff.task.id, { ...eff.entry });
          break;
        case "activate": case "complete": case "retry": case "requeue": case "release":
        case "promote": case "fireGroup": case "revive": case "archive": case "cancel": {
          expect(isStateTransition(eff)).toBe(true);
          const id = eff.entry.id;
          expect(this.rows.has(id), `transition of ${id}, which is not an unfinished row`).toBe(true);
          if (FINISHED_STATES.has(eff.entry.state)) {
            this.rows.delete(id);
            this.finished.set(id, eff.entry.state);
          } else {
            this.rows.set(id, { ...eff.entry });
          }
          break;
        }
        case "delete":
          this.rows.delete(eff.id);
          break;
        case "setPaused":
          expect(eff.paused).toBe(this.paused);
          break;
      }
    }
    return { effects, events };
  }

  /** Memory, storage and model agree. */
  checkInvariants(): void {
    const snap = this.core.snapshot();
    const byIdSnap = new Map(snap.map((e) => [e.id, e]));
    // (3) every task is exactly once either unfinished in memory (matching its stored
    // row) or finished in storage: never lost, never duplicated.
    expect(snap.length).toBe(byIdSnap.size);
    expect([...byIdSnap.keys()].sort()).toEqual([...this.rows.keys()].sort());
    for (const [id, row] of this.rows) expect(withoutLeaseExpiry(byIdSnap.get(id)!)).toEqual(withoutLeaseExpiry(row));
    for (const id of this.inserted) expect(this.rows.has(id) !== this.finished.has(id), `${id} is in exactly one place`).toBe(true);
    expect(this.rows.size + this.finished.size).toBe(this.inserted.size);

    // Leases: one per active task, exactly the model's live leases.
    const activeLeases = new Map<string, string>();
    for (const e of snap) {
      if (e.state === "active") {
        expect(e.leaseId).not.toBe("");
        expect(activeLeases.has(e.leaseId)).toBe(false);
        activeLeases.set(e.leaseId, e.id);
      } else {
        expect(e.leaseId).toBe("");
      }
    }
    expect(new Map([...this.leases].map(([id, l]) => [id, l.taskId]))).toEqual(activeLeases);
    // Each running task carries its attempt's end (durable); a live lease's end is ahead.
    for (const e of snap) {
      const l = this.leases.get(e.leaseId);
      expect(e.attemptEndsAtMs).toBe(e.state === "active" ? l!.endsAtMs : 0);
      if (l && l.endsAtMs > 0) expect(l.endsAtMs).toBeGreaterThan(this.nowMs);
    }
    expect(new Set(activeLeases.values()).size).toBe(activeLeases.size); // (2)

    // Slot accounting matches the active tasks.
    const activeByKey = this.activeByKey();
    for (const key of KEYS) {
      if (key !== "") expect(this.core.inflightOfKey(key), `inflight of ${key}`).toBe(activeByKey.get(key) ?? 0);
    }
    const stats = this.core.stats();
    expect(stats.unfinished).toBe(snap.length);
    expect(stats.leases).toBe(activeLeases.size);
    expect(stats.inflightKeyed).toBe(snap.filter((e) => e.state === "active" && e.concurrencyKey !== "").length);
    expect(this.core.paused).toBe(this.paused);
    expect(this.core.keyLimit).toBe(this.limit);

    // A unique key (no TTL here) is held by at most one unfinished task.
    const uniques = snap.map((e) => e.uniqueKey).filter((k) => k !== "");
    expect(new Set(uniques).size).toBe(uniques.length);
    // Every timed task has a wake-up at or before its time.
    const wake = this.core.nextWakeAtMs();
    for (const e of snap) {
      if (e.state === "scheduled" || e.state === "retry") expect(wake).toBeLessThanOrEqual(e.readyAtMs);
      if (e.attemptEndsAtMs > 0) expect(wake).toBeLessThanOrEqual(e.attemptEndsAtMs);
    }
  }
}

const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

function property(options: RunOptions, maxCommands: number) {
  const limitArb = fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined, freq: 3 });
  const cmdsArb = fc.array(cmdArb(options.profile), { minLength: 5, maxLength: maxCommands, size: "max" });
  return fc.property(fc.integer({ min: 1, max: 1_000_000 }), limitArb, cmdsArb, (seed, limit, cmds) => {
    const runner = new Runner(seed, options);
    for (const cmd of [{ kind: "keyLimit", limit } as const, ...cmds]) {
      runner.run(cmd);
      runner.checkInvariants();
    }
  });
}

describe("QueueCore properties (random command sequences)", () => {
  it("keeps memory, effects and model in agreement; honours key limits; passivation is invisible", () => {
    for (const key of Object.keys(coverage) as (keyof typeof coverage)[]) coverage[key] = 0;
    fc.assert(property({ cancelPendingKeyed: false, profile: BALANCED }, 40), { seed: 20_240_601, numRuns: 120 });
    // The generated runs really went through the interesting situations.
    for (const [what, count] of Object.entries(coverage)) expect(count, `coverage of ${what}`).toBeGreaterThanOrEqual(10);
  });

  it("the same with one hot key and frequent cancels of waiting and running tasks (pending keyed tasks: next test)", () => {
    fc.assert(property({ cancelPendingKeyed: false, profile: HOT_KEY }, 40), { seed: 7, numRuns: 80 });
  });

  // Regression: cancelling a pending keyed task once lost its key's slot (see
  // test/unit/queue-core.key-limit.test.ts), so fast-check found sequences where a held
  // task stalled although its key had free slots, and where the rebuilt core's next lease
  // differed from the old one's.
  // (Shrinking is off to keep the suite fast; drop endOnFailure for a minimal sequence.)
  it("with cancels of pending keyed tasks too, no held task stalls and key slots are never lost", () => {
    fc.assert(property({ cancelPendingKeyed: true, profile: HOT_KEY }, 40), { seed: 7, numRuns: 80, endOnFailure: true });
  });
});
