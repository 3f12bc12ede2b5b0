/**
 * A member's view of the partition records (cluster/partition-owners.ts) on the in-memory
 * coordination: a read of every record (`refresh`, which the forwarder calls after a
 * WRONG_OWNER) that is answered only after the watch applied a later change must not take
 * the view back to the read. Found by test/property/changelog-failover.property.test.ts:
 * a node's own new claim, undone by such a read, left its partition served by nobody.
 */
import { describe, expect, it } from "vitest";
import { ClusterKeys, type MemberEntry } from "../../src/cluster/coordination.js";
import { MemoryCoordination, MemoryEtcd, NO_FAULTS } from "../../src/cluster/memory-coordination.js";
import { PartitionOwners, type MembershipView } from "../../src/cluster/partition-owners.js";
import { FakeClock } from "../support/fake-clock.js";

const logger = { info: () => {}, warn: () => {}, error: () => {} };

describe("a member's view of the partition records", () => {
  it("keeps the changes its watch applied over a read answered after them", async () => {
    const clock = new FakeClock();
    const store = new MemoryEtcd(clock);
    const settle = async <T,>(p: Promise<T>): Promise<T> => {
      let done = false;
      p.then(() => (done = true), () => (done = true));
      for (let t = 0; !done; t += 10) {
        if (t > 10_000) throw new Error("did not settle");
        clock.advance(10);
        await new Promise((r) => setImmediate(r));
      }
      return p;
    };
    // Every answer comes 100 ms after the store applied the call; watch events at once.
    const coordination = new MemoryCoordination(store, "t", clock, { ...NO_FAULTS, latencyMs: () => 100 });
    const membership: MembershipView = {
      nodeId: "a", ringVersion: 1, serving: () => true, members: () => new Map<string, MemberEntry>(),
      registration: () => ({ nodeId: "a", memberRevision: 1, incarnation: "a-1" }),
    };
    const owners = new PartitionOwners({ coordination, membership, partitions: 4, clock, logger, rewatchMs: 1_000 });
    await settle(owners.start());
    expect(owners.record(1)).toBeUndefined();

    const refreshed = owners.refresh();
    // A claim lands after the read, and the watch brings it before the read's answer.
    store.write([{ key: new ClusterKeys("t").partition(1), value: JSON.stringify({ owner: "b", incarnation: "b-1", memberRevision: 7, state: "owned" }) }]);
    clock.advance(0);
    expect(owners.record(1)?.record.owner).toBe("b");
    await settle(refreshed);
    expect(owners.record(1)?.record.owner, "the older read did not undo the watched claim").toBe("b");
    await owners.stop();
  });
});
