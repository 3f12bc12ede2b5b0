/**
 * The operator's drain and move (cluster/placement-control.ts) on the in-memory
 * coordination and a fake clock, with two real members and their partition views:
 * validation refuses with the catalog's errors and writes nothing; a drain or pin is
 * seen by the other member's view; a wait ends when the records show the move done, or
 * after its time with `finished: false`.
 */
import { describe, expect, it } from "vitest";
import { ClusterMember } from "../../src/cluster/cluster-member.js";
import { MemoryCoordination, MemoryEtcd } from "../../src/cluster/memory-coordination.js";
import { PartitionOwners } from "../../src/cluster/partition-owners.js";
import { PlacementControl } from "../../src/cluster/placement-control.js";
import { FakeClock } from "../support/fake-clock.js";

const P = 8;

async function setup() {
  const clock = new FakeClock();
  const store = new MemoryEtcd(clock);
  const logger = { info: () => {}, warn: () => {}, error: () => {} };
  const settle = async <T,>(p: Promise<T>, boundMs = 30_000): Promise<T> => {
    let done = false;
    p.then(() => (done = true), () => (done = true));
    for (let t = 0; !done; t += 10) {
      if (t > boundMs) throw new Error(`did not settle within ${boundMs}ms of simulated time`);
      clock.advance(10);
      await new Promise((r) => setImmediate(r));
    }
    return p;
  };
  const node = async (nodeId: string) => {
    const coordination = new MemoryCoordination(store, "t", clock);
    const member = new ClusterMember({
      coordination, clock, cluster: "t", partitions: P, ttlMs: 3_000, logger, newIncarnation: () => `${nodeId}-1`,
      self: { nodeId, grpc: `${nodeId}:1`, http: `${nodeId}:2`, version: "t", dataDirId: `dir-${nodeId}`, startedAtMs: 0 },
    });
    const owners = new PartitionOwners({ coordination, membership: member, partitions: P, clock, logger, rewatchMs: 1_000 });
    await settle(member.start());
    await settle(owners.start());
    const control = new PlacementControl({ coordination, owners, members: () => member.members(), clock });
    return { member, owners, control };
  };
  const a = await node("a");
  const b = await node("b");
  await settle(new Promise<void>((r) => setImmediate(r)));
  return { a, b, settle, clock, store };
}

describe("PlacementControl", () => {
  it("refuses bad input with the catalog's errors and writes nothing", async () => {
    const { a, settle, store } = await setup();
    const revision = store.revision;
    await expect(settle(a.control.drain("nosuch", false, 0))).rejects.toMatchObject({ code: "NOT_FOUND", reason: "NODE_NOT_FOUND", field: "node_id" });
    await expect(settle(a.control.drain("nosuch", true, 0))).rejects.toMatchObject({ reason: "NODE_NOT_FOUND" });
    await expect(settle(a.control.move(P, "b", false, 0))).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "partition" });
    await expect(settle(a.control.move(1, "nosuch", false, 0))).rejects.toMatchObject({ reason: "NODE_NOT_FOUND" });
    await expect(settle(a.control.move(1, "", false, 0))).rejects.toMatchObject({ field: "to_node_id" });
    await expect(settle(a.control.move(1, "b", true, 0))).rejects.toMatchObject({ field: "to_node_id" });
    await expect(settle(a.control.drain("b", false, 600_001))).rejects.toMatchObject({ field: "wait_ms" });
    expect(store.revision).toBe(revision);
  });

  it("a drain is seen by every member's view; the last undrained member cannot be drained; a drained node takes no pin; undo", async () => {
    const { a, b, settle } = await setup();
    const out = await settle(a.control.drain("b", false, 0));
    expect(out).toMatchObject({ nodeId: "b", drained: true, partitionsLeft: 0 });
    await settle(new Promise<void>((r) => setImmediate(r)));
    expect(b.owners.drained("b")).toBe(true);
    expect(b.owners.desiredOwners()).toEqual(Array(P).fill("a"));
    await expect(settle(b.control.drain("a", false, 0))).rejects.toMatchObject({ code: "FAILED_PRECONDITION", reason: "PLACEMENT_REFUSED" });
    await expect(settle(b.control.move(2, "b", false, 0))).rejects.toMatchObject({ reason: "PLACEMENT_REFUSED", message: expect.stringMatching(/b is drained/) });
    // Draining again is a no-op; undo gives b its share of the ring back.
    await settle(a.control.drain("b", false, 0));
    await settle(b.control.drain("b", true, 1_000));
    await settle(new Promise<void>((r) => setImmediate(r)));
    expect(a.owners.drained("b")).toBe(false);
    expect(a.owners.desiredOwners()).toContain("b");
  });

  it("a move waits until the target holds the partition, or answers unfinished after its wait", async () => {
    const { a, b, settle } = await setup();
    // a holds p (its first call claimed it), then an operator moves p to b.
    const p = a.owners.desiredOwners().indexOf("a");
    const epoch = await settle(a.owners.acquire(p));
    expect(epoch).toBeGreaterThan(0);
    const timedOut = await settle(b.control.move(p, "b", false, 2_000));
    expect(timedOut).toMatchObject({ partition: p, fromNodeId: "a", heldBy: "a", pinnedTo: "b", finished: false });
    expect(timedOut.waitedMs).toBeGreaterThanOrEqual(2_000);
    expect(a.owners.desiredOwner(p)).toBe("b");
    // The handoff's last step: a releases p to b, whose view claims it; the waiting call then answers.
    const waiting = b.control.move(p, "b", false, 10_000);
    await settle(a.owners.release(p, epoch!, "b"));
    const done = await settle(waiting);
    expect(done).toMatchObject({ heldBy: "b", pinnedTo: "b", finished: true });
    expect(done.waitedMs).toBeLessThan(10_000);
    // Unpin: the ring decides again.
    const unpinned = await settle(a.control.move(p, "", true, 0));
    expect(unpinned).toMatchObject({ pinnedTo: "", finished: true });
    await settle(new Promise<void>((r) => setImmediate(r)));
    expect(b.owners.overrides.pins.has(p)).toBe(false);
  });
});
