/**
 * The ClusterMember shell on the in-memory coordination and a fake clock: joining,
 * refusing another partition count, taking over a dead registration of its own data
 * directory, a watch whose start was compacted away, a registration etcd answered late,
 * and a clean stop that revokes.
 */
import { describe, expect, it } from "vitest";
import { ClusterJoinError, ClusterMember } from "../../src/cluster/cluster-member.js";
import type { Clock } from "../../src/base/clock.js";
import { ClusterKeys, type Coordination, type KeepAliveResult } from "../../src/cluster/coordination.js";
import { MemoryCoordination, MemoryEtcd } from "../../src/cluster/memory-coordination.js";
import { FakeClock } from "../support/fake-clock.js";

const TTL = 3_000;

function setup() {
  const clock = new FakeClock();
  const store = new MemoryEtcd(clock);
  const logs: string[] = [];
  let n = 0;
  /** A process's clock: once `dead` (kill -9), nothing of it runs again. */
  const processClock = () => {
    const c = { dead: false, nowMs: () => clock.nowMs(), setTimer: (d: number, fn: () => void) => clock.setTimer(d, () => c.dead || fn()) };
    return c;
  };
  const member = (nodeId: string, options: { partitions?: number; dataDirId?: string; clock?: ReturnType<typeof processClock>; coordination?: (own: Clock) => Coordination } = {}) => {
    const own = options.clock ?? processClock();
    return new ClusterMember({
      coordination: options.coordination?.(own) ?? new MemoryCoordination(store, "t", own), clock: own, cluster: "t", partitions: options.partitions ?? 64, ttlMs: TTL,
      self: { nodeId, grpc: `${nodeId}:1`, http: `${nodeId}:2`, version: "t", dataDirId: options.dataDirId ?? `dir-${nodeId}`, startedAtMs: 0 },
      newIncarnation: () => `${nodeId}-${++n}`,
      logger: { info: (_o, m) => logs.push(m), warn: (_o, m) => logs.push(m), error: (_o, m) => logs.push(m) },
    });
  };
  /** Moves simulated time until `p` settles (bounded). */
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
  return { clock, store, logs, member, settle, processClock };
}

describe("ClusterMember", () => {
  it("joins, and a second member sees it at the same ring version", async () => {
    const { member, settle } = setup();
    const a = member("a");
    const b = member("b");
    await settle(a.start());
    await settle(b.start());
    await settle(new Promise<void>((r) => setTimeout(r, 0)));
    const [sa, sb] = [await settle(a.status()), await settle(b.status())];
    expect(sa.members.map((m) => [m.entry.record.nodeId, m.entry.record.state])).toEqual([["a", "active"], ["b", "active"]]);
    expect(sb.ringVersion).toBe(sa.ringVersion);
    expect(sa.owners).toEqual(sb.owners);
  });

  it("refuses to join a cluster created with another partition count", async () => {
    const { member, settle } = setup();
    await settle(member("a").start());
    await expect(settle(member("b", { partitions: 32 }).start())).rejects.toThrow(ClusterJoinError);
    await expect(settle(member("c", { partitions: 32 }).start())).rejects.toThrow(/created with cluster_partitions=64.*this node has cluster_partitions=32/);
  });

  it("takes over a dead registration of its own data directory at once; refuses one of another directory", async () => {
    const { member, settle, store, processClock } = setup();
    const oldClock = processClock();
    const old = member("a", { clock: oldClock });
    await settle(old.start());
    // The old process dies without revoking (kill -9): its key stays for a TTL. Same data dir: taken over.
    oldClock.dead = true;
    const again = member("a");
    await settle(again.start(), 500);
    const key = store.get(new ClusterKeys("t").member("a"));
    expect(JSON.parse(key!.value)).toMatchObject({ incarnation: again.core.incarnation, state: "active" });
    // Another data dir under the same node id while the key is live: refused after the start deadline.
    await expect(settle(member("a", { dataDirId: "elsewhere" }).start())).rejects.toThrow(/node id "a" is registered by another live process/);
  });

  it("a watch whose history was compacted starts from the read instead of looping", async () => {
    const { member, settle, store, logs } = setup();
    const a = member("a");
    await settle(a.start());
    const x = member("x");
    await settle(x.start());
    await settle(x.stop());
    store.compact(store.revision);
    const b = member("b");
    await settle(b.start());
    expect(logs.filter((l) => l.startsWith("member watch ended")).length).toBe(1);
    const sb = await settle(b.status());
    expect(sb.members.map((m) => m.entry.record.nodeId)).toEqual(["a", "b"]);
    // After b's own registration (a change both watched), the ring versions agree again.
    expect(sb.ringVersion).toBe((await settle(a.status())).ringVersion);
  });

  it("a registration etcd answered late does not fence the new incarnation at once", async () => {
    // After a partition heals, etcd may take seconds to grant a lease (electing a leader),
    // and a keep-alive is not answered at once either: the node knows its lease lives a TTL
    // from when it asked for it, so without renewing it first it would have to fence itself
    // as soon as it became active.
    const { member, settle, store, clock } = setup();
    class SlowEtcd extends MemoryCoordination {
      private readonly grantDelayMs = 0.72 * TTL;
      private later<T>(ms: number, answer: () => Promise<T>): Promise<T> {
        return new Promise<void>((resolve) => clock.setTimer(ms, resolve)).then(answer);
      }
      override grantLease(ttlMs: number): Promise<string> {
        return this.later(this.grantDelayMs, () => super.grantLease(ttlMs));
      }
      override keepAlive(leaseId: string, timeoutMs: number): Promise<KeepAliveResult> {
        return super.keepAlive(leaseId, timeoutMs).then((result) => this.later(0.1 * TTL, async () => result));
      }
    }
    const a = member("a", { coordination: (own) => new SlowEtcd(store, "t", own) });
    await settle(a.start());
    await settle(new Promise<void>((resolve) => clock.setTimer(3 * TTL, resolve)));
    expect((await settle(a.status())).fences).toBe(0);
    expect(a.core.phase).toBe("active");
  });

  it("stop marks draining, then revokes: the key is gone at once", async () => {
    const { member, settle, store } = setup();
    const a = member("a");
    await settle(a.start());
    const writes: string[] = [];
    store.watch("/conveyor/t/members/", store.revision + 1, (e) => writes.push(`${e.kind}:${e.kind === "put" ? JSON.parse(e.kv.value).state : ""}`));
    await settle(a.stop());
    expect(writes).toEqual(["put:draining", "delete:"]);
    expect(store.get(new ClusterKeys("t").member("a"))).toBeUndefined();
  });
});
