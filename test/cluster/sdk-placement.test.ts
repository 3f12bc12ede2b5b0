/**
 * The SDK's cluster calls against two real nodes on etcd (issue 38): `clusterStatus`
 * shows both members with their addresses and lease time, `drainNode` with a wait
 * answers once the drained node holds nothing (and undo brings partitions back), and
 * `movePartition` pins a partition to a member and answers once it holds it. Bad input
 * (an unknown node, a partition out of range) is refused with the node's reason.
 */
import { describe, expect, it } from "vitest";
import { json, newTask } from "../../src/index.js";
import { clusterFixture, queuesOn, startCluster } from "../support/cluster.js";
import { eventually } from "../support/node-process.js";
import { Ring } from "../support/ring.js";
import { rejection } from "../support/sdk.js";

const fixture = clusterFixture();
const { nodes, closers } = fixture;

describe("SDK cluster calls (real processes)", { timeout: 90_000 }, () => {
  it("status, drain with a wait and undo, move and unpin", async () => {
    const { byId } = await startCluster(fixture.etcd, ["s1", "s2"], nodes, 5, closers);
    const admin = fixture.client(byId.get("s1")!).admin;

    const status = await admin.clusterStatus({ withLeases: true });
    expect(status).toMatchObject({ clustered: true, nodeId: "s1", phase: "active", serving: true });
    expect(status.members.map((m) => [m.nodeId, m.state, m.self])).toEqual([["s1", "active", true], ["s2", "active", false]]);
    expect(status.members[1]!.grpcAddress).toBe(byId.get("s2")!.grpcAddress);
    expect(status.members[1]!.leaseLeftMs).toBeGreaterThan(0);
    // A partition is claimed by its first call: an enqueue on a queue of s2's makes s2 hold one.
    const s2Queue = queuesOn(["s1", "s2"], 1).get("s2")![0]!;
    await fixture.client(byId.get("s1")!).enqueue(newTask("t", json({})), { queue: s2Queue });
    await eventually("s2 to hold a partition", async () => {
      const s = await admin.clusterStatus();
      return s.members.find((m) => m.nodeId === "s2")!.partitionsOwned > 0 ? true : undefined;
    }, 20_000);

    const drained = await admin.drainNode("s2", { wait: "30s" });
    console.log(`drain s2: finished=${drained.finished} in ${drained.waitedMs} ms`);
    expect(drained).toMatchObject({ nodeId: "s2", drained: true, partitionsLeft: 0, finished: true });
    const after = await admin.clusterStatus();
    expect(after.drainedNodes).toEqual(["s2"]);
    expect(after.members.find((m) => m.nodeId === "s2")).toMatchObject({ drained: true, partitionsOwned: 0 });
    expect(await admin.drainNode("s2", { undo: true })).toMatchObject({ drained: false, finished: true });

    // A partition s1 holds (claimed by an enqueue) moves to s2.
    const s1Queue = queuesOn(["s1", "s2"], 1).get("s1")![0]!;
    await fixture.client(byId.get("s1")!).enqueue(newTask("t", json({})), { queue: s1Queue });
    const p = new Ring(["x"], 1, status.partitions).partitionOf(s1Queue);
    const moved = await admin.movePartition(p, { to: "s2" }, { wait: "30s" });
    console.log(`move partition ${p} from ${moved.fromNodeId || "nobody"}: finished=${moved.finished} in ${moved.waitedMs} ms`);
    expect(moved).toMatchObject({ partition: p, fromNodeId: "s1", heldBy: "s2", pinnedTo: "s2", finished: true });
    expect((await admin.clusterStatus()).partitionStates[p]).toMatchObject({ owner: "s2", pinnedTo: "s2" });
    expect(await admin.movePartition(p, { unpin: true })).toMatchObject({ partition: p, pinnedTo: "", finished: true });

    expect((await rejection(admin.drainNode("nobody"))).reason).toBe("NODE_NOT_FOUND");
    expect((await rejection(admin.movePartition(100_000, { to: "s2" }))).code).toBe("INVALID_ARGUMENT");
  });
});
