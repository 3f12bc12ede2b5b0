/**
 * With a changelog, a partition recorded as this node's is served only once this node
 * fenced its log at that claim's epoch (cluster/partition-owners.ts, `route`), on the
 * in-memory coordination and a fake clock. A log opened at an earlier claim does not
 * count: a node that lost the partition to a takeover while paused still has the old
 * claim's opening in its journal (nothing closed it), and when the partition comes back to
 * it, its watch shows the new claim before the claim path has fenced the log. Serving then
 * used the old claim's appender: the zombie test (changelog-zombie.test.ts) saw an enqueue
 * answered FENCED ("taken over by another node") by the node the partition had just been
 * handed back to.
 */
import { describe, expect, it } from "vitest";
import { ClusterMember } from "../../src/cluster/cluster-member.js";
import { MemoryCoordination, MemoryEtcd } from "../../src/cluster/memory-coordination.js";
import { PartitionOwners, type PartitionLogGate } from "../../src/cluster/partition-owners.js";
import { FakeClock } from "../support/fake-clock.js";

const P = 4;

describe("a claimed partition's route with a changelog", () => {
  it("is local only once the log is fenced at the claim's own epoch, not at an earlier one", async () => {
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
    // The journal as the gate sees it (TurnJournal.isOpen): the epoch each partition was
    // fenced at. The second fence is held, as a slow log would hold it.
    const fencedAt = new Map<number, number>();
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    let opens = 0;
    const gate: PartitionLogGate = {
      isOpen: (p, epoch?: number) => fencedAt.has(p) && (epoch === undefined || fencedAt.get(p) === epoch),
      open: async (p, epoch) => {
        if (opens++ > 0) await held;
        fencedAt.set(p, epoch);
      },
      // A takeover closes nothing here: the node was away (only an append that fails, or a release, would).
      close: () => {},
    };
    const coordination = new MemoryCoordination(store, "t", clock);
    const member = new ClusterMember({
      coordination, clock, cluster: "t", partitions: P, ttlMs: 3_000, logger, newIncarnation: () => "a-1",
      self: { nodeId: "a", grpc: "a:1", http: "a:2", version: "t", dataDirId: "dir-a", startedAtMs: 0 },
    });
    const owners = new PartitionOwners({ coordination, membership: member, partitions: P, clock, logger, rewatchMs: 1_000, log: gate });
    await settle(member.start());
    await settle(owners.start());

    const p = 1;
    expect(owners.route(p).kind).toBe("claim");
    const first = await settle(owners.acquire(p));
    expect(owners.route(p)).toMatchObject({ kind: "local", epoch: first });

    // The record moves on to a new claim of this node's (here: released to it, then claimed
    // again, as a handoff back does) while the journal still holds the first claim's fence.
    const self = member.registration();
    await settle(coordination.releasePartition(p, { nodeId: "a", incarnation: self.incarnation, memberRevision: self.memberRevision }, first!, "a"));
    await settle(new Promise<void>((r) => setImmediate(r)));
    const record = await settle(coordination.partitions());
    const second = record.records.get(p)!.epoch;
    expect(record.records.get(p)!.record).toMatchObject({ owner: "a", state: "owned" });
    expect(second).toBeGreaterThan(first!);
    // The new claim is recorded (the watch has shown it), its fence is not done: not served yet.
    expect(owners.record(p)).toMatchObject({ epoch: second });
    expect(owners.route(p)).toEqual({ kind: "claim", p });
    expect(owners.holds(p)).toBe(false);
    // Once fenced at the new epoch, it is.
    release();
    await settle(new Promise<void>((r) => setImmediate(r)));
    expect(owners.route(p)).toMatchObject({ kind: "local", epoch: second });
    expect(owners.holds(p)).toBe(true);
  });
});
