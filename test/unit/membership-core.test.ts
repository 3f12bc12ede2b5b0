/**
 * MembershipCore step by step, with exact times: registration to active, the keep-alive
 * schedule, fencing at 3/4 of the TTL since the last answered keep-alive was sent (not
 * received), a lost lease, this node's key deleted, and a clean stop that revokes.
 */
import { describe, expect, it } from "vitest";
import type { MemberEntry } from "../../src/cluster/coordination.js";
import { MembershipCore } from "../../src/cluster/membership.js";

const TTL = 3_000;
const entry = (nodeId: string, state: "joining" | "active", createRevision: number, modRevision = createRevision): MemberEntry => ({
  record: { nodeId, incarnation: `${nodeId}-i`, state, grpc: "", http: "", version: "", dataDirId: "", startedAtMs: 0 },
  createRevision, modRevision, leaseId: "L",
});

function activeCore(): MembershipCore {
  let n = 0;
  const core = new MembershipCore({ nodeId: "a", ttlMs: TTL, newIncarnation: () => `inc-${++n}` });
  core.handle({ kind: "snapshot", read: { members: [entry("b", "active", 5)], revision: 9 } }, 0);
  expect(core.handle({ kind: "start" }, 0)).toEqual([{ kind: "register", incarnation: "inc-1", state: "joining" }]);
  expect(core.handle({ kind: "registered", incarnation: "inc-1", leaseId: "L1", createRevision: 10, sentAtMs: 0 }, 20))
    .toEqual([{ kind: "registeredAs", incarnation: "inc-1", createRevision: 10 }]);
  // The watch shows the registration: the node asks to become active.
  expect(core.handle({ kind: "change", change: { kind: "put", entry: entry("a", "joining", 10), revision: 10 } }, 30))
    .toEqual([{ kind: "writeState", leaseId: "L1", createRevision: 10, state: "active" }]);
  expect(core.handle({ kind: "stateWritten", leaseId: "L1", state: "active", ok: true }, 40)).toEqual([{ kind: "active", incarnation: "inc-1" }]);
  core.handle({ kind: "change", change: { kind: "put", entry: entry("a", "active", 10, 11), revision: 11 } }, 45);
  return core;
}

describe("MembershipCore", () => {
  it("registers, becomes active once it sees itself, and keeps the ring version of the last change", () => {
    const core = activeCore();
    expect(core.phase).toBe("active");
    expect(core.serving(50)).toBe(true);
    expect(core.view.ringVersion).toBe(11);
    expect(core.view.activeMembers()).toEqual(["a", "b"]);
    // A stale or repeated change does not move the version.
    core.handle({ kind: "change", change: { kind: "put", entry: entry("b", "active", 5), revision: 5 } }, 60);
    expect(core.view.ringVersion).toBe(11);
  });

  it("sends a keep-alive every 500 ms (TTL/3 if shorter), another while one is unanswered, and fences at 3/4 TTL after the last answered one was sent", () => {
    const core = activeCore();
    const keepAlive = { kind: "keepAlive", leaseId: "L1" };
    expect(core.nextWakeAtMs()).toBe(500);
    expect(core.handle({ kind: "tick" }, 500)).toEqual([keepAlive]);
    // Not answered within 125 ms (a quarter of the interval): another goes (fresh keep-alives get through first while etcd elects a leader).
    expect(core.nextWakeAtMs()).toBe(625);
    expect(core.handle({ kind: "tick" }, 625)).toEqual([keepAlive]);
    // Answered late (at 900), but it was sent at 500: that is what counts, and the next is due an interval after it.
    core.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 500, result: "alive" }, 900);
    expect(core.nextWakeAtMs()).toBe(1_000);
    // The second, answered after it, moves both on; an older answer arriving later moves nothing back.
    core.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 625, result: "alive" }, 950);
    core.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 500, result: "alive" }, 960);
    expect(core.nextWakeAtMs()).toBe(1_125);
    expect(core.handle({ kind: "tick" }, 1_125)).toEqual([keepAlive]);
    core.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 1_125, result: "failed" }, 1_150);
    // A failed keep-alive is retried soon (another etcd endpoint may answer), not an interval later.
    expect(core.nextWakeAtMs()).toBe(1_250);
    expect(core.handle({ kind: "tick" }, 1_250)).toEqual([keepAlive]);
    core.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 1_250, result: "failed" }, 1_260);
    expect(core.serving(2_874)).toBe(true);
    expect(core.serving(2_875)).toBe(false); // 625 + 3/4 x 3,000
    expect(core.nextWakeAtMs()).toBe(1_375);
    core.handle({ kind: "tick" }, 1_375);
    core.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 1_375, result: "failed" }, 1_400);
    const actions = core.handle({ kind: "tick" }, 2_875);
    expect(actions).toEqual([
      { kind: "fenced", reason: expect.stringContaining("no keep-alive answered for 2250ms"), incarnation: "inc-1", silentMs: 2_250 },
      { kind: "abandonLease", leaseId: "L1" },
      { kind: "register", incarnation: "inc-2", state: "joining" },
    ]);
    expect(core.fences).toBe(1);
    expect(core.serving(2_875)).toBe(false);
    // Answers for the old lease are ignored.
    expect(core.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 2_800, result: "alive" }, 2_880)).toEqual([]);
    expect(core.serving(2_880)).toBe(false);
  });

  it("a paused process fences on its first input after the pause, before acting on it", () => {
    const core = activeCore();
    const actions = core.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 900, result: "alive" }, 10_000);
    expect(actions[0]).toMatchObject({ kind: "fenced" });
    expect(core.serving(10_000)).toBe(false);
  });

  it("fences at once when etcd says the lease is gone, or the watch shows its key deleted", () => {
    const a = activeCore();
    expect(a.handle({ kind: "keepAlive", leaseId: "L1", sentAtMs: 500, result: "lost" }, 600).map((x) => x.kind)).toEqual(["fenced", "abandonLease", "register"]);
    const b = activeCore();
    // A delete of an older registration of this node (revision before its own create) is not about it.
    expect(b.handle({ kind: "change", change: { kind: "delete", nodeId: "a", revision: 9 } }, 100)).toEqual([]);
    expect(b.handle({ kind: "change", change: { kind: "delete", nodeId: "a", revision: 12 } }, 100).map((x) => x.kind)).toEqual(["fenced", "abandonLease", "register"]);
  });

  it("a failed registration is retried after a third of the TTL, 250 ms at most (soon after etcd returns)", () => {
    const core = new MembershipCore({ nodeId: "a", ttlMs: TTL, newIncarnation: () => "x" });
    core.handle({ kind: "start" }, 0);
    core.handle({ kind: "registerFailed", incarnation: "x", error: "etcd unreachable" }, 10);
    expect(core.nextWakeAtMs()).toBe(260);
    expect(core.handle({ kind: "tick" }, 260)).toEqual([{ kind: "register", incarnation: "x", state: "joining" }]);
  });

  it("drains, then a stop revokes the lease", () => {
    const core = activeCore();
    expect(core.handle({ kind: "drain" }, 100)).toEqual([{ kind: "writeState", leaseId: "L1", createRevision: 10, state: "draining" }]);
    expect(core.phase).toBe("draining");
    core.handle({ kind: "stateWritten", leaseId: "L1", state: "draining", ok: true }, 110);
    expect(core.handle({ kind: "stop" }, 120)).toEqual([{ kind: "revoke", leaseId: "L1" }]);
    expect(core.phase).toBe("stopped");
    expect(core.serving(120)).toBe(false);
  });

  it("refuses a TTL under a second (etcd leases are whole seconds)", () => {
    expect(() => new MembershipCore({ nodeId: "a", ttlMs: 500, newIncarnation: () => "x" })).toThrow(/at least 1s/);
  });
});
