import { describe, expect, it } from "vitest";
import {
  entryOf,
  enqueueAll,
  lastTransition,
  leaseOne,
  leasedIds,
  makeCore,
  newTask,
  settleOk,
} from "../support/core-fixtures.js";

describe("QueueCore: expiry before dispatch (expiresAtMs)", () => {
  it("a pending task past its expiry is archived instead of leased", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const stale = newTask({ expiresAtMs: t0 + 100, priority: 9 });
    const fresh = newTask();
    enqueueAll(core, [stale, fresh], t0);
    core.drain();
    // No tick in between: lease itself notices.
    expect(leasedIds(core.lease(10, t0 + 100))).toEqual([fresh.id]);
    const { effects, events } = core.drain();
    const tr = lastTransition(effects, stale.id);
    expect(tr.state).toBe("archived");
    expect(tr.outcome?.lastError).toMatch(/expired/);
    expect(tr.outcome).toMatchObject({ finishedAtMs: t0 + 100, lastFailedAtMs: t0 + 100 });
    expect(events).toContainEqual({ kind: "settled", outcome: "archived", count: 1 });
    expect(core.has(stale.id)).toBe(false);
  });

  it("tick archives a pending task at its expiry and nextWakeAtMs reports it", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const t = newTask({ expiresAtMs: t0 + 100 });
    enqueueAll(core, [t], t0);
    core.drain();
    expect(core.nextWakeAtMs()).toBe(t0 + 100);
    core.tick(t0 + 99);
    expect(core.has(t.id)).toBe(true);
    core.tick(t0 + 100);
    const tr = lastTransition(core.drain().effects, t.id);
    expect(tr.state).toBe("archived");
    expect(tr.outcome?.lastError).toMatch(/expired/);
    expect(core.has(t.id)).toBe(false);
    expect(core.pruneAndHasDispatchable(time.nowMs)).toBe(false);
  });

  it("tick archives a scheduled task whose expiry comes before its processAt", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const t = newTask({ processAtMs: t0 + 1_000, expiresAtMs: t0 + 500 });
    enqueueAll(core, [t], t0);
    expect(core.nextWakeAtMs()).toBe(t0 + 500);
    core.tick(t0 + 500);
    expect(lastTransition(core.drain().effects, t.id).state).toBe("archived");
  });

  it("a task leased before its expiry is not archived by the expiry timer while it runs", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const t = newTask({ expiresAtMs: t0 + 100 });
    enqueueAll(core, [t], t0);
    const plan = leaseOne(core, t0 + 50);
    core.tick(t0 + 200);
    expect(entryOf(core, t.id)?.state).toBe("active");
    settleOk(core, plan, t0 + 300);
    expect(lastTransition(core.drain().effects, t.id).state).toBe("completed");
  });

  // Regression: expires_at means "archive the task if it has not been dispatched by
  // this instant" (proto/conveyor/v1/task.proto, TaskSpec.expires_at_ms), and
  // expireIfOverdue exempts the `retry` state for that reason. But once the retry is
  // promoted back to pending, lease() calls expireIfOverdue again, the exemption no
  // longer applies, and a task that WAS dispatched is archived as "expired before dispatch".
  it("a task dispatched before its expiry is retried after it, not archived as 'expired before dispatch'", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const t = newTask({ expiresAtMs: t0 + 100, backoffBaseMs: 1_000, backoffMaxMs: 1_000 });
    enqueueAll(core, [t], t0);
    const plan = leaseOne(core, t0 + 10);
    settleOk(core, plan, t0 + 20, { outcome: "retry", error: "transient" });
    const readyAt = entryOf(core, t.id)!.readyAtMs;
    expect(readyAt).toBeGreaterThan(t0 + 100);
    core.tick(readyAt);
    core.drain();
    // Actual: [] and the task is archived with lastError "expired before dispatch".
    expect(leasedIds(core.lease(1, readyAt))).toEqual([t.id]);
  });

  it("a retry task is not archived by its expiry timer while it waits out its backoff", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const t = newTask({ expiresAtMs: t0 + 100, backoffBaseMs: 1_000, backoffMaxMs: 1_000 });
    enqueueAll(core, [t], t0);
    settleOk(core, leaseOne(core, t0 + 10), t0 + 20, { outcome: "retry" });
    core.tick(t0 + 100);
    expect(entryOf(core, t.id)?.state).toBe("retry");
  });
});

describe("QueueCore: deadlines", () => {
  it("a waiting task whose deadline passed is archived before dispatch (lease and tick)", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const viaLease = newTask({ deadlineAtMs: t0 + 100 });
    const viaTick = newTask({ deadlineAtMs: t0 + 200, processAtMs: t0 + 10_000 });
    enqueueAll(core, [viaLease, viaTick], t0);
    core.drain();
    expect(core.lease(10, t0 + 100)).toEqual([]);
    const tr = lastTransition(core.drain().effects, viaLease.id);
    expect(tr.state).toBe("archived");
    expect(tr.outcome?.lastError).toMatch(/deadline/);

    core.tick(t0 + 200);
    const tr2 = lastTransition(core.drain().effects, viaTick.id);
    expect(tr2.state).toBe("archived");
    expect(tr2.outcome?.lastError).toMatch(/deadline/);
    expect(core.snapshot()).toEqual([]);
  });

  it("a retry task whose deadline passes during its backoff is archived by tick", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const t = newTask({ deadlineAtMs: t0 + 300, backoffBaseMs: 10_000, backoffMaxMs: 10_000 });
    enqueueAll(core, [t], t0);
    settleOk(core, leaseOne(core, t0), t0 + 10, { outcome: "retry" });
    core.drain();
    core.tick(t0 + 300);
    const tr = lastTransition(core.drain().effects, t.id);
    expect(tr.state).toBe("archived");
    expect(tr.outcome?.lastError).toMatch(/deadline/);
  });

  it("the effective deadline of a delivery is min(deadline, now + timeout)", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const cases = [
      { timeoutMs: 0, deadlineAtMs: 0, want: 0 },
      { timeoutMs: 500, deadlineAtMs: 0, want: t0 + 500 },
      { timeoutMs: 0, deadlineAtMs: t0 + 700, want: t0 + 700 },
      { timeoutMs: 500, deadlineAtMs: t0 + 700, want: t0 + 500 },
      { timeoutMs: 900, deadlineAtMs: t0 + 700, want: t0 + 700 },
    ];
    for (const c of cases) {
      enqueueAll(core, [newTask({ timeoutMs: c.timeoutMs, deadlineAtMs: c.deadlineAtMs })], t0);
      expect(leaseOne(core, t0).deadlineAtMs, JSON.stringify(c)).toBe(c.want);
    }
  });

  it("the per-attempt timeout is measured from each lease", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const t = newTask({ timeoutMs: 300 });
    enqueueAll(core, [t], t0);
    const first = leaseOne(core, t0);
    expect(first.deadlineAtMs).toBe(t0 + 300);
    settleOk(core, first, t0 + 50, { outcome: "released" });
    expect(leaseOne(core, t0 + 400).deadlineAtMs).toBe(t0 + 700);
  });
});

describe("QueueCore: rate-limited wake-ups", () => {
  it("wakes when the next token arrives, and not again while a token waits for a Lease call", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    core.setRateLimit({ ratePerSec: 10, burst: 1 }, t0);
    enqueueAll(core, [newTask(), newTask(), newTask()], t0);
    core.drain();
    expect(leasedIds(core.lease(10, t0))).toHaveLength(1);
    core.drain();
    // The bucket is empty and work waits: the grain wakes when the next token is there (100 ms at 10/s).
    expect(core.nextWakeAtMs()).toBe(t0 + 100);
    core.tick(t0 + 100);
    core.drain();
    // A token waits and nobody leases: nothing to wake for before the lease's own deadline
    // (it used to answer "now", and the grain re-armed its timer at the same instant forever).
    const next = core.nextWakeAtMs()!;
    expect(next).toBeGreaterThan(t0 + 100);
    core.tick(t0 + 150);
    expect(core.nextWakeAtMs()).toBe(next);
    // The next Lease call takes the waiting token; the bucket is empty again.
    expect(leasedIds(core.lease(10, t0 + 150))).toHaveLength(1);
    expect(core.nextWakeAtMs()).toBe(t0 + 250);
  });
});
