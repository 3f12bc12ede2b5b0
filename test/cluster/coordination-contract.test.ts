/**
 * One suite, two implementations of the coordination port: the real one on a real etcd
 * and the in-memory fake on a fake clock. What the membership and claim logic rely on
 * must hold for both, or the property tests on the fake prove nothing.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Etcd3 } from "etcd3";
import {
  TYPE_RULES_WRITE_MAX, WatchCompactedError, type Claimant, type Coordination, type MemberChange, type MemberRecord, type OverrideChange,
  type TypeRulesChange,
} from "../../src/cluster/coordination.js";
import { EtcdCoordination } from "../../src/cluster/etcd-coordination.js";
import { MemoryCoordination, MemoryEtcd } from "../../src/cluster/memory-coordination.js";
import { startEtcd, type EtcdCluster } from "../support/etcd.js";
import { FakeClock } from "../support/fake-clock.js";
import { eventually } from "../support/node-process.js";

interface Harness {
  /** A new client on the same store, for a fresh cluster name per test. */
  client(cluster: string): Coordination;
  /** Awaits a call (the fake needs its clock moved for answers to arrive). */
  run<T>(p: Promise<T>): Promise<T>;
  /** Waits (bounded) until `probe` holds, letting time pass. */
  until(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void>;
  /** etcd's compaction: history up to `revision` is dropped. */
  compact(revision: number): Promise<void>;
}

const record = (nodeId: string, incarnation = randomUUID(), dataDirId = `dir-${nodeId}`): MemberRecord => ({
  nodeId, incarnation, state: "joining", grpc: `127.0.0.1:1${nodeId.length}`, http: "127.0.0.1:2", version: "test", dataDirId, startedAtMs: 1,
});

function contract(name: string, harness: () => Harness) {
  describe(`coordination contract: ${name}`, () => {
    let h: Harness;
    beforeAll(() => {
      h = harness();
    });

    it("stores the cluster meta once; a later node reads the stored value", async () => {
      const c = h.client(`c${randomUUID().slice(0, 8)}`);
      expect(await h.run(c.clusterMeta({ partitions: 64, createdAtMs: 1 }))).toEqual({ partitions: 64, createdAtMs: 1 });
      expect(await h.run(c.clusterMeta({ partitions: 32, createdAtMs: 2 }))).toEqual({ partitions: 64, createdAtMs: 1 });
      await c.close();
    });

    it("registers a member under a lease: create only if absent, update only the same registration, watched in order, gone on revoke", async () => {
      const c = h.client(`c${randomUUID().slice(0, 8)}`);
      const before = await h.run(c.members());
      const seen: MemberChange[] = [];
      const watch = await h.run(c.watchMembers(before.revision + 1, (ch) => seen.push(ch), () => {}));
      const lease = await h.run(c.grantLease(5_000));
      const created = await h.run(c.putMember(record("a"), lease, { create: true }));
      expect(created.ok).toBe(true);
      expect(created.createRevision).toBe(created.revision);
      const again = await h.run(c.putMember(record("a"), lease, { create: true }));
      expect(again).toMatchObject({ ok: false, existing: { record: { nodeId: "a" }, createRevision: created.createRevision } });
      expect((await h.run(c.putMember({ ...record("a"), state: "active" }, lease, { updateOf: created.createRevision + 1000 }))).ok).toBe(false);
      const updated = await h.run(c.putMember({ ...record("a"), state: "active" }, lease, { updateOf: created.createRevision }));
      expect(updated.ok).toBe(true);
      const read = await h.run(c.members());
      expect(read.members.map((m) => [m.record.nodeId, m.record.state, m.createRevision, m.modRevision])).toEqual([["a", "active", created.createRevision, updated.revision]]);
      expect(await h.run(c.leaseTimeLeftMs(lease))).toBeGreaterThan(0);
      await h.run(c.revokeLease(lease));
      expect(await h.run(c.leaseTimeLeftMs(lease))).toBe(-1);
      expect((await h.run(c.members())).members).toEqual([]);
      await h.until("the watch to see put, put, delete", async () => seen.length >= 3, 5_000);
      expect(seen.map((ch) => [ch.kind, ch.revision])).toEqual([["put", created.revision], ["put", updated.revision], ["delete", expect.any(Number)]]);
      expect(seen[2]!.revision).toBeGreaterThan(updated.revision);
      await watch.cancel();
      await c.close();
    });

    it("a watch from a past revision replays the changes since then", async () => {
      const c = h.client(`c${randomUUID().slice(0, 8)}`);
      const lease = await h.run(c.grantLease(5_000));
      const put = await h.run(c.putMember(record("b"), lease, { create: true }));
      await h.run(c.revokeLease(lease));
      const seen: MemberChange[] = [];
      const watch = await h.run(c.watchMembers(put.revision, (ch) => seen.push(ch), () => {}));
      await h.until("the replayed put and delete", async () => seen.length >= 2, 5_000);
      expect(seen.map((ch) => ch.kind)).toEqual(["put", "delete"]);
      await watch.cancel();
      await c.close();
    });

    it("a watch from a compacted revision ends with WatchCompactedError", async () => {
      const c = h.client(`c${randomUUID().slice(0, 8)}`);
      const lease = await h.run(c.grantLease(5_000));
      const put = await h.run(c.putMember(record("z"), lease, { create: true }));
      await h.run(c.revokeLease(lease));
      await h.compact((await h.run(c.members())).revision);
      let failure: Error | undefined;
      const watch = await h.run(c.watchMembers(put.revision, () => {}, (err) => (failure = err)));
      await h.until("the watch to fail", async () => failure !== undefined, 5_000);
      expect(failure).toBeInstanceOf(WatchCompactedError);
      await watch.cancel().catch(() => {});
      await c.close();
    });

    it("stores task-type rules in versioned transactions: a write naming an old version changes nothing; reads and watches see each write whole", async () => {
      const c = h.client(`c${randomUUID().slice(0, 8)}`);
      const empty = await h.run(c.typeRules());
      expect(empty).toMatchObject({ entries: [], version: 0 });
      const seen: TypeRulesChange[] = [];
      const watch = await h.run(c.watchTypeRules(empty.revision + 1, (ch) => seen.push(ch), () => {}));
      const first = await h.run(c.writeTypeRules({ puts: [{ type: "email", value: "v-email" }, { type: "a/b", value: "v-ab" }], deletes: [] }, 0));
      expect(first.ok).toBe(true);
      const v1 = first.ok ? first.version : 0;
      expect(v1).toBeGreaterThan(empty.revision);
      // Another writer still at version 0 (it has not seen the first write) is refused, and nothing changes.
      expect(await h.run(c.writeTypeRules({ puts: [{ type: "email", value: "stale" }], deletes: [] }, 0))).toEqual({ ok: false });
      const afterFirst = await h.run(c.typeRules());
      expect(afterFirst.version).toBe(v1);
      expect(afterFirst.entries).toEqual([{ type: "a/b", value: "v-ab" }, { type: "email", value: "v-email" }]);
      const second = await h.run(c.writeTypeRules({ puts: [{ type: "sms", value: "v-sms" }], deletes: ["email", "never-stored"] }, v1));
      expect(second.ok).toBe(true);
      const v2 = second.ok ? second.version : 0;
      const afterSecond = await h.run(c.typeRules());
      expect(afterSecond).toMatchObject({ version: v2, entries: [{ type: "a/b", value: "v-ab" }, { type: "sms", value: "v-sms" }] });
      await h.until("the watch to see both writes", async () => seen.length >= 4, 5_000);
      expect(seen.map((ch) => (ch.kind === "put" ? ["put", ch.entry.type, ch.entry.value, ch.revision] : ["delete", ch.type, ch.revision])).sort())
        .toEqual([["delete", "email", v2], ["put", "a/b", "v-ab", v1], ["put", "email", "v-email", v1], ["put", "sms", "v-sms", v2]].sort());
      await watch.cancel();
      // Writes beyond the port's bound, or empty, are refused before reaching the store.
      const tooMany = { puts: Array.from({ length: TYPE_RULES_WRITE_MAX + 1 }, (_, i) => ({ type: `t${i}`, value: "x" })), deletes: [] };
      await expect(c.writeTypeRules(tooMany, v2)).rejects.toThrow(/at most/);
      await expect(c.writeTypeRules({ puts: [], deletes: [] }, v2)).rejects.toThrow(/empty/);
      expect((await h.run(c.typeRules())).version).toBe(v2);
      await c.close();
    });

    it("a rules watch from a compacted revision ends with WatchCompactedError", async () => {
      const c = h.client(`c${randomUUID().slice(0, 8)}`);
      const written = await h.run(c.writeTypeRules({ puts: [{ type: "t", value: "1" }], deletes: [] }, 0));
      const version = written.ok ? written.version : 0;
      expect(version).toBeGreaterThan(0);
      expect((await h.run(c.writeTypeRules({ puts: [{ type: "t", value: "2" }], deletes: [] }, version))).ok).toBe(true);
      await h.compact((await h.run(c.typeRules())).revision);
      let failure: Error | undefined;
      const watch = await h.run(c.watchTypeRules(version, () => {}, (err) => (failure = err)));
      await h.until("the rules watch to fail", async () => failure !== undefined, 5_000);
      expect(failure).toBeInstanceOf(WatchCompactedError);
      await watch.cancel().catch(() => {});
      await c.close();
    });

    it("a lease that is not kept alive ends after its TTL and takes its key; keep-alive then says lost", async () => {
      const c = h.client(`c${randomUUID().slice(0, 8)}`);
      const lease = await h.run(c.grantLease(1_000));
      expect((await h.run(c.putMember(record("x"), lease, { create: true }))).ok).toBe(true);
      expect(await h.run(c.keepAlive(lease, 1_000))).toBe("alive");
      await h.until("the member key to expire", async () => (await h.run(c.members())).members.length === 0, 5_000);
      expect(await h.run(c.keepAlive(lease, 1_000))).toBe("lost");
      await c.close();
    });

    it("claims a partition in one transaction: absent, released, or its owner's registration gone; epochs grow", async () => {
      const cluster = `c${randomUUID().slice(0, 8)}`;
      const c = h.client(cluster);
      const register = async (nodeId: string): Promise<[Claimant, string]> => {
        const lease = await h.run(c.grantLease(5_000));
        const r = await h.run(c.putMember(record(nodeId), lease, { create: true }));
        return [{ nodeId, incarnation: randomUUID(), memberRevision: r.createRevision }, lease];
      };
      const [a, leaseA] = await register("a");
      const [b] = await register("b");
      const first = await h.run(c.claimPartition(7, a));
      expect(first.ok).toBe(true);
      expect(await h.run(c.claimPartition(7, a))).toEqual(first); // idempotent for the holder
      const refused = await h.run(c.claimPartition(7, b));
      expect(refused).toMatchObject({ ok: false, holder: { owner: "a", state: "owned" } });
      // A stale claimant (an old registration of b) cannot claim anything.
      expect((await h.run(c.claimPartition(8, { ...b, memberRevision: b.memberRevision - 1 }))).ok).toBe(false);
      await h.run(c.revokeLease(leaseA)); // a's registration is gone
      const taken = await h.run(c.claimPartition(7, b));
      expect(taken.ok).toBe(true);
      if (!taken.ok || !first.ok) throw new Error("unreachable");
      expect(taken.epoch).toBeGreaterThan(first.epoch);
      // Release needs the current epoch.
      expect(await h.run(c.releasePartition(7, b, first.epoch))).toBe(false);
      expect(await h.run(c.releasePartition(7, b, taken.epoch))).toBe(true);
      const [a2] = await register("a");
      const back = await h.run(c.claimPartition(7, a2));
      expect(back.ok && back.epoch > taken.epoch).toBe(true);
      const all = (await h.run(c.partitions())).records;
      expect(all.get(7)).toMatchObject({ record: { owner: "a", state: "owned", memberRevision: a2.memberRevision } });
      await c.close();
    });

    it("stores drains and pins with no lease: set, removed, read back, watched in order; idempotent", async () => {
      const cluster = `c${randomUUID().slice(0, 8)}`;
      const c = h.client(cluster);
      const before = await h.run(c.overrides());
      expect([...before.drains]).toEqual([]);
      expect([...before.pins]).toEqual([]);
      const seen: OverrideChange[] = [];
      const watch = await h.run(c.watchOverrides(before.revision + 1, (ch) => seen.push(ch), () => {}));
      await h.run(c.setDrain("n2", true));
      await h.run(c.setDrain("n2", true));
      await h.run(c.setPin(7, "n1"));
      await h.run(c.setPin(7, "n3"));
      await h.run(c.setDrain("n4", true));
      await h.run(c.setDrain("n4", false));
      await h.run(c.setPin(9, "n1"));
      await h.run(c.setPin(9, undefined));
      const read = await h.run(c.overrides());
      expect([...read.drains]).toEqual(["n2"]);
      expect([...read.pins]).toEqual([[7, "n3"]]);
      await h.until("the watch to see every override change", async () => seen.length >= 8, 5_000);
      expect(seen.map((ch) => (ch.kind === "drain" ? ["drain", ch.nodeId, ch.drained] : ["pin", ch.p, ch.nodeId ?? null]))).toEqual([
        ["drain", "n2", true], ["drain", "n2", true], ["pin", 7, "n1"], ["pin", 7, "n3"],
        ["drain", "n4", true], ["drain", "n4", false], ["pin", 9, "n1"], ["pin", 9, null],
      ]);
      for (let i = 1; i < seen.length; i++) expect(seen[i]!.revision).toBeGreaterThan(seen[i - 1]!.revision);
      // Another cluster's overrides are its own.
      const other = h.client(`c${randomUUID().slice(0, 8)}`);
      expect([...(await h.run(other.overrides())).drains]).toEqual([]);
      await watch.cancel();
      await other.close();
      await c.close();
    });

    it("deletes a member key only if it is still the given registration", async () => {
      const c = h.client(`c${randomUUID().slice(0, 8)}`);
      const lease = await h.run(c.grantLease(5_000));
      const r = await h.run(c.putMember(record("d"), lease, { create: true }));
      expect(await h.run(c.deleteMember("d", r.createRevision + 1))).toBe(false);
      expect(await h.run(c.deleteMember("d", r.createRevision))).toBe(true);
      expect((await h.run(c.members())).members).toEqual([]);
      await h.run(c.revokeLease(lease));
      await c.close();
    });
  });
}

let etcd: EtcdCluster;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

contract("etcd", () => ({
  client: (cluster) => new EtcdCoordination({ endpoints: etcd.hosts, cluster }),
  run: (p) => p,
  until: (what, probe, timeoutMs) => eventually(what, async () => ((await probe()) ? true : undefined), timeoutMs).then(() => {}),
  compact: async (revision) => {
    const raw = new Etcd3({ hosts: etcd.hosts });
    try {
      await raw.kv.compact({ revision: String(revision), physical: true });
    } finally {
      raw.close();
    }
  },
}));

contract("memory", () => {
  const clock = new FakeClock();
  const store = new MemoryEtcd(clock);
  const run = async <T,>(p: Promise<T>): Promise<T> => {
    let done = false;
    p.then(() => (done = true), () => (done = true));
    for (let i = 0; !done; i++) {
      if (i > 10_000) throw new Error("a fake call never settled");
      clock.advance(1);
      await new Promise((r) => setImmediate(r));
    }
    return p;
  };
  return {
    client: (cluster) => new MemoryCoordination(store, cluster, clock),
    run,
    compact: async (revision) => store.compact(revision),
    until: async (what, probe, timeoutMs) => {
      for (let waited = 0; !(await probe()); waited += 50) {
        if (waited > timeoutMs) throw new Error(`timed out (simulated ${timeoutMs}ms) waiting for ${what}`);
        clock.advance(50);
        await new Promise((r) => setImmediate(r));
      }
    },
  };
});
