/** TaskWaiters (WaitTask's registry) under a hand-driven clock: no real timers, no sleeps. */
import { describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { TaskWaiters, type WaitEnd } from "../../src/server/task-waiters.js";

/** A clock whose timers fire only when the test says so. */
function manualClock() {
  const timers = new Set<{ atMs: number; fn: () => void }>();
  let nowMs = 0;
  return {
    setTimer(delayMs: number, fn: () => void) {
      const t = { atMs: nowMs + delayMs, fn };
      timers.add(t);
      return () => void timers.delete(t);
    },
    advance(ms: number) {
      nowMs += ms;
      for (const t of [...timers]) if (t.atMs <= nowMs && timers.delete(t)) t.fn();
    },
    get armed() {
      return timers.size;
    },
  };
}

/** What a wait ended with so far (undefined while it is parked). */
function outcome(p: Promise<WaitEnd>) {
  const seen: { end?: WaitEnd } = {};
  void p.then((end) => (seen.end = end));
  return seen;
}
const turn = () => new Promise((resolve) => setImmediate(resolve));

describe("TaskWaiters", () => {
  it("wakes every waiter of a task when it ends, and only those", async () => {
    const clock = manualClock();
    const waiters = new TaskWaiters({ clock, max: 10 });
    const a1 = outcome(waiters.wait("a", 1000).ended);
    const a2 = outcome(waiters.wait("a", 1000).ended);
    const b = outcome(waiters.wait("b", 1000).ended);
    waiters.notify(["a", "zzz"]);
    await turn();
    expect([a1.end, a2.end, b.end]).toEqual(["ended", "ended", undefined]);
    expect(waiters.size).toBe(1);
    expect(clock.armed).toBe(1); // the woken waiters' timers are gone
  });

  it("ends a waiter at its timeout, not before", async () => {
    const clock = manualClock();
    const waiters = new TaskWaiters({ clock, max: 10 });
    const w = outcome(waiters.wait("a", 1000).ended);
    clock.advance(999);
    await turn();
    expect(w.end).toBeUndefined();
    clock.advance(1);
    await turn();
    expect(w.end).toBe("timeout");
    expect(waiters.size).toBe(0);
    waiters.notify(["a"]); // a late end finds nobody
  });

  it("ends a waiter whose caller went away (signal) or that was cancelled", async () => {
    const clock = manualClock();
    const waiters = new TaskWaiters({ clock, max: 10 });
    const abort = new AbortController();
    const w1 = outcome(waiters.wait("a", 1000, abort.signal).ended);
    const second = waiters.wait("a", 1000);
    const w2 = outcome(second.ended);
    abort.abort();
    second.cancel();
    await turn();
    expect([w1.end, w2.end]).toEqual(["cancelled", "cancelled"]);
    expect(waiters.size).toBe(0);
    expect(clock.armed).toBe(0);
  });

  it("refuses a waiter beyond its maximum with WAITERS_FULL, and takes one again once a place frees", async () => {
    const clock = manualClock();
    const waiters = new TaskWaiters({ clock, max: 2 });
    waiters.wait("a", 1000);
    waiters.wait("b", 1000);
    let refused: unknown;
    try {
      waiters.wait("c", 1000);
    } catch (e) {
      refused = e;
    }
    expect(refused).toBeInstanceOf(ConveyorError);
    expect((refused as ConveyorError).reason).toBe("WAITERS_FULL");
    expect((refused as ConveyorError).message).toContain("2 waiting WaitTask calls");
    waiters.notify(["a"]);
    expect(() => waiters.wait("c", 1000)).not.toThrow();
  });

  it("releaseAll answers every waiter (the node is stopping)", async () => {
    const clock = manualClock();
    const waiters = new TaskWaiters({ clock, max: 10 });
    const ws = ["a", "a", "b"].map((id) => outcome(waiters.wait(id, 1000).ended));
    waiters.releaseAll();
    await turn();
    expect(ws.map((w) => w.end)).toEqual(["cancelled", "cancelled", "cancelled"]);
    expect(waiters.size).toBe(0);
  });
});
