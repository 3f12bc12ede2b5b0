/**
 * The node ends an attempt at its timeout or the task's deadline, whatever the worker
 * does (issue 9, finding 12): the lease is revoked, the attempt fails (backoff, or
 * archived), its slots free up, and the worker's late settle or heartbeat is refused.
 */
import { describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import { QueueCore } from "../../src/grains/queue/queue-core.js";
import { slotOf } from "../../src/grains/queue/key-slots.js";
import type { TaskRule } from "../../src/grains/queue/rules.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import {
  LEASE_TTL_MS,
  NO_KNOWN,
  coreConfig,
  entryOf,
  enqueueAll,
  expectConveyorError,
  lastTransition,
  leaseIdCounter,
  leaseOne,
  leasedIds,
  makeCore,
  newTask,
  reload,
  settleOk,
} from "../support/core-fixtures.js";

/** Long enough that a lease never lapses in these tests unless they say so. */
const LONG_TTL_MS = 60_000;

describe("QueueCore: the node ends an attempt at its timeout", () => {
  it("a timed-out attempt is revoked and retried with backoff; a late settle and heartbeat are refused", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    const t0 = time.nowMs;
    const t = newTask({ timeoutMs: 500, backoffBaseMs: 1_000, backoffMaxMs: 1_000 });
    enqueueAll(core, [t], t0);
    const plan = leaseOne(core, t0);
    expect(plan.deadlineAtMs).toBe(t0 + 500);
    expect(lastTransition(core.drain().effects, t.id).entry).toMatchObject({ state: "active", attemptEndsAtMs: t0 + 500 });
    expect(core.nextWakeAtMs()).toBe(t0 + 500);

    core.tick(t0 + 499);
    expect(entryOf(core, t.id)?.state).toBe("active");
    expect(core.heartbeat([plan.leaseId], t0 + 499)[0]).toMatchObject({ held: true });

    core.tick(t0 + 500);
    const { effects, events } = core.drain();
    expect(events).toContainEqual({ kind: "attempt_timed_out", leaseId: plan.leaseId, taskIds: [t.id] });
    const tr = lastTransition(effects, t.id);
    expect(tr.entry).toMatchObject({ state: "retry", retried: 1, leaseId: "", leaseExpiresAtMs: 0, attemptEndsAtMs: 0 });
    expect(tr.outcome).toMatchObject({ lastError: "timed out after 500ms", lastFailedAtMs: t0 + 500 });
    // Backoff, not its old place: between half and all of the 1 s cap.
    expect(tr.entry.readyAtMs).toBeGreaterThanOrEqual(t0 + 500 + 500);
    expect(tr.entry.readyAtMs).toBeLessThanOrEqual(t0 + 500 + 1_000);
    expect(core.stats().leases).toBe(0);

    const [late] = core.settle([{ leaseId: plan.leaseId, taskId: t.id, outcome: "success" }], t0 + 3_000);
    expectConveyorError(late, "FAILED_PRECONDITION", "LEASE_NOT_HELD");
    expect(late!.message).toContain("timed out");
    expect(core.heartbeat([plan.leaseId], t0 + 3_000)[0]).toEqual({
      leaseId: plan.leaseId, held: false, cancelRequested: false, cancelReason: "", leaseExpiresAtMs: 0,
    });
    expect(core.drain().effects).toEqual([]);

    // The next attempt gets a fresh timeout, measured from its own lease.
    core.tick(tr.entry.readyAtMs);
    const second = leaseOne(core, tr.entry.readyAtMs + 10);
    expect(second.deadlineAtMs).toBe(tr.entry.readyAtMs + 10 + 500);
  });

  it("a settle or heartbeat that arrives after the end, before the grain's timer fired, is refused and ends the attempt", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    const t0 = time.nowMs;
    const a = newTask({ timeoutMs: 300 });
    const b = newTask({ timeoutMs: 300 });
    enqueueAll(core, [a, b], t0);
    const [pa, pb] = core.lease(2, t0);
    core.drain();
    // No tick: the settle itself notices the attempt is over.
    const [error] = core.settle([{ leaseId: pa!.leaseId, taskId: a.id, outcome: "success" }], t0 + 300);
    expectConveyorError(error, "FAILED_PRECONDITION", "LEASE_NOT_HELD");
    expect(lastTransition(core.drain().effects, a.id).entry).toMatchObject({ state: "retry", retried: 1 });
    // Nor does a heartbeat keep it alive.
    expect(core.heartbeat([pb!.leaseId], t0 + 301)[0]).toMatchObject({ held: false, cancelRequested: false });
    expect(lastTransition(core.drain().effects, b.id).outcome?.lastError).toBe("timed out after 300ms");
    // A settle just before the end is taken.
    const c = newTask({ timeoutMs: 300 });
    enqueueAll(core, [c], t0 + 400);
    settleOk(core, leaseOne(core, t0 + 400), t0 + 699);
    expect(lastTransition(core.drain().effects, c.id).state).toBe("completed");
  });

  it("with retries exhausted, a timed-out attempt archives the task", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    const t0 = time.nowMs;
    const t = newTask({ timeoutMs: 200, maxRetry: 0 });
    enqueueAll(core, [t], t0);
    leaseOne(core, t0);
    core.tick(t0 + 200);
    const tr = lastTransition(core.drain().effects, t.id);
    expect(tr.state).toBe("archived");
    expect(tr.outcome).toMatchObject({ lastError: "timed out after 200ms", finishedAtMs: t0 + 200 });
    expect(core.has(t.id)).toBe(false);
  });

  it("the task's deadline ends the attempt and archives the task (not retried)", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    const t0 = time.nowMs;
    const t = newTask({ deadlineAtMs: t0 + 700, timeoutMs: 5_000, maxRetry: 5 });
    enqueueAll(core, [t], t0);
    expect(leaseOne(core, t0 + 100).deadlineAtMs).toBe(t0 + 700);
    core.tick(t0 + 699);
    expect(entryOf(core, t.id)?.state).toBe("active");
    core.tick(t0 + 700);
    const tr = lastTransition(core.drain().effects, t.id);
    expect(tr.state).toBe("archived");
    expect(tr.outcome?.lastError).toBe("attempt timed out at the task's deadline (deadline exceeded: not retried)");
  });

  it("frees the per-key slot: the held task of that key dispatches at the timeout", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    core.setKeyLimit(1, time.nowMs);
    const t0 = time.nowMs;
    const stuck = newTask({ concurrencyKey: "k", timeoutMs: 500 });
    const next = newTask({ concurrencyKey: "k" });
    enqueueAll(core, [stuck, next], t0);
    expect(leasedIds(core.lease(10, t0))).toEqual([stuck.id]);
    expect(core.stats().held).toBe(1);
    core.drain();
    core.tick(t0 + 500);
    expect(core.drain().readyChanged).toBe(true); // parked Lease calls are woken
    expect(core.inflightOfKey("k")).toBe(0);
    expect(leasedIds(core.lease(10, t0 + 500))).toEqual([next.id]);
    expect(core.inflightOfKey("k")).toBe(1);
  });

  it("frees rule slots and shared (node-wide) slots", async () => {
    const rules: TaskRule[] = [
      { ruleId: "t#0", key: "k", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" },
      { ruleId: "@lim", key: "k", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" },
    ];
    const cores = new Map<string, QueueCore>();
    const ledger = new SharedSlotLedger((queue, slot) => cores.get(queue)!.wakeSlot(slot));
    const newId = leaseIdCounter();
    const make = (queue: string) => new QueueCore(queue, coreConfig(LONG_TTL_MS), {
      random: seededRandom(1), newId, sharedSlots: ledger.forQueue(queue),
    });
    const q1 = make("q1");
    const q2 = make("q2");
    cores.set("q1", q1).set("q2", q2);
    const t0 = 1_000_000;
    const a = newTask({ queue: "q1", type: "t", rules, timeoutMs: 400 });
    const a2 = newTask({ queue: "q1", type: "t", rules });
    const b = newTask({ queue: "q2", type: "u", rules: [rules[1]!] });
    enqueueAll(q1, [a, a2], t0);
    enqueueAll(q2, [b], t0);
    expect(leasedIds(q1.lease(10, t0))).toEqual([a.id]);
    expect(q2.lease(10, t0)).toEqual([]);
    expect(ledger.inflightOf(slotOf("@lim", "k"))).toBe(1);
    q1.tick(t0 + 400);
    expect(q1.inflightOfRule("t#0", "k")).toBe(0);
    expect(ledger.inflightOf(slotOf("@lim", "k"))).toBe(0);
    await new Promise<void>((resolve) => setImmediate(resolve)); // the ledger wakes q2 after the turn
    expect(leasedIds(q2.lease(10, t0 + 400))).toEqual([b.id]);
    expect(q1.lease(10, t0 + 400)).toEqual([]); // a2 now waits on the shared slot b holds
  });

  it("a lease that lapses before the attempt's end keeps the lapse path (its place, no backoff)", () => {
    const { core, time } = makeCore(); // 1 s TTL
    const t0 = time.nowMs;
    const t = newTask({ timeoutMs: 5_000 });
    enqueueAll(core, [t], t0);
    const seq = entryOf(core, t.id)!.seq;
    leaseOne(core, t0);
    core.drain();
    core.tick(t0 + LEASE_TTL_MS);
    const { effects, events } = core.drain();
    expect(events.map((e) => e.kind)).toContain("lease_expired");
    expect(events.map((e) => e.kind)).not.toContain("attempt_timed_out");
    expect(lastTransition(effects, t.id).entry).toMatchObject({ state: "pending", seq, retried: 1 });
  });

  it("heartbeats keep a lease but not an attempt past its end; when both are due, the earlier decides", () => {
    const { core, time } = makeCore(); // 1 s TTL
    const t0 = time.nowMs;
    const t = newTask({ timeoutMs: 2_500 });
    enqueueAll(core, [t], t0);
    const plan = leaseOne(core, t0);
    for (let at = t0 + 600; at < t0 + 2_500; at += 600) {
      core.tick(at);
      expect(core.heartbeat([plan.leaseId], at)[0]).toMatchObject({ held: true });
    }
    core.drain();
    // The last heartbeat (t0+2400) keeps the lease until t0+3400; the attempt ends at t0+2500.
    core.tick(t0 + 5_000); // a late timer: both instants have passed
    const { effects, events } = core.drain();
    expect(events.map((e) => e.kind)).toContain("attempt_timed_out");
    expect(events.map((e) => e.kind)).not.toContain("lease_expired");
    expect(lastTransition(effects, t.id).entry).toMatchObject({ state: "retry", retried: 1 });

    // And the other way round: a lease that lapsed before its attempt's end, seen late.
    const u = newTask({ timeoutMs: 2_500 });
    enqueueAll(core, [u], t0 + 10_000);
    leaseOne(core, t0 + 10_000);
    core.drain();
    core.tick(t0 + 20_000);
    const late = core.drain();
    expect(late.events.map((e) => e.kind)).toEqual(expect.arrayContaining(["lease_expired"]));
    expect(lastTransition(late.effects, u.id).entry).toMatchObject({ state: "pending", retried: 1 });
  });

  it("a batch times out as a whole at its earliest member's end; each member backs off as a batch of one", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    core.setGroupConfig("", { maxSize: 3, maxDelayMs: 60_000, graceMs: 60_000 }, time.nowMs);
    const t0 = time.nowMs;
    const members = [newTask({ type: "digest", group: "g", timeoutMs: 800 }), newTask({ type: "digest", group: "g" }), newTask({ type: "digest", group: "g", timeoutMs: 300 })];
    core.enqueue(members, NO_KNOWN, t0, false);
    core.tick(t0 + 1_000);
    const caps = { batchTypes: new Set(["digest"]) };
    const [batch] = core.lease(10, t0 + 1_000, caps);
    expect(batch).toMatchObject({ batch: true, deadlineAtMs: t0 + 1_300 });
    expect(core.snapshot().map((e) => e.attemptEndsAtMs)).toEqual([t0 + 1_300, t0 + 1_300, t0 + 1_300]);
    // One member finished in time; the others are cut off with the batch.
    settleOk(core, batch!, t0 + 1_100);
    core.drain();
    core.tick(t0 + 1_300);
    const { effects, events } = core.drain();
    expect(events).toContainEqual({ kind: "attempt_timed_out", leaseId: batch!.leaseId, taskIds: [members[1]!.id, members[2]!.id] });
    for (const m of members.slice(1)) {
      expect(lastTransition(effects, m.id)).toMatchObject({
        state: "retry", entry: { retried: 1, batchId: m.id }, outcome: { lastError: "timed out after 300ms" },
      });
    }
    const [late] = core.settle([{ leaseId: batch!.leaseId, taskId: members[1]!.id, outcome: "success" }], t0 + 1_400);
    expectConveyorError(late, "FAILED_PRECONDITION", "LEASE_NOT_HELD");
  });

  it("the attempt's end survives passivation (it is stored); a row from before it was stored gets a fresh timeout", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    const t0 = time.nowMs;
    const t = newTask({ timeoutMs: 5_000 });
    enqueueAll(core, [t], t0);
    const plan = leaseOne(core, t0);
    const rebuilt = reload(core, t0 + 3_000, { leaseTtlMs: LONG_TTL_MS });
    expect(rebuilt.nextWakeAtMs()).toBe(t0 + 5_000);
    rebuilt.tick(t0 + 5_000);
    expect(lastTransition(rebuilt.drain().effects, t.id).entry).toMatchObject({ state: "retry", retried: 1 });
    expect(rebuilt.heartbeat([plan.leaseId], t0 + 5_000)[0]).toMatchObject({ held: false });

    // A row written by a version that did not store the end (0): the timeout counts from load.
    const legacy = makeCore({ leaseTtlMs: LONG_TTL_MS }).core;
    const row = { ...entryOf(core, t.id)!, state: "active" as const, leaseId: "old", leaseExpiresAtMs: t0, attemptEndsAtMs: 0, retried: 0 };
    legacy.load([row], { paused: false }, t0 + 3_000);
    expect(legacy.nextWakeAtMs()).toBe(t0 + 8_000);
  });

  it("a task without timeout or deadline has no attempt end", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    const t0 = time.nowMs;
    const t = newTask();
    enqueueAll(core, [t], t0);
    const plan = leaseOne(core, t0);
    expect(plan.deadlineAtMs).toBe(0);
    expect(entryOf(core, t.id)?.attemptEndsAtMs).toBe(0);
    expect(core.nextWakeAtMs()).toBe(t0 + LONG_TTL_MS);
    core.tick(t0 + LONG_TTL_MS - 1);
    expect(entryOf(core, t.id)?.state).toBe("active");
  });
});

describe("QueueCore: attempt ends stay safe integers", () => {
  it("a timeout or deadline beyond 2^53 ms gives an end of Number.MAX_SAFE_INTEGER (storable, sendable)", () => {
    const { core, time } = makeCore({ leaseTtlMs: LONG_TTL_MS });
    const t0 = time.nowMs;
    enqueueAll(core, [newTask({ timeoutMs: 106_751_991_000 * 86_400_000 })], t0);
    expect(leaseOne(core, t0).deadlineAtMs).toBe(Number.MAX_SAFE_INTEGER);
    enqueueAll(core, [newTask({ deadlineAtMs: 2 ** 63 })], t0);
    const plan = leaseOne(core, t0);
    expect(plan.deadlineAtMs).toBe(Number.MAX_SAFE_INTEGER);
    expect(Number.isSafeInteger(entryOf(core, plan.taskIds[0]!)!.attemptEndsAtMs)).toBe(true);
  });
});
