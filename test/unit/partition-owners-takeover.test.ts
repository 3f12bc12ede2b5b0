/**
 * A takeover is reported where the claim is won (PartitionOwners.onClaimed's
 * `takenOverFrom`), once per claim, whichever path claimed it: the network fault test
 * found conveyor_cluster_failovers_total counting 22 takeovers of 2 partitions (one per
 * pass over the records that joined a claim waiting for the log) and, in another run, 0
 * (a call's claim won first). Two real members on the in-memory coordination and a fake
 * clock, with a changelog gate whose fence can be held.
 *
 * And a claim at a new epoch (after a fence and a new registration) is not served, nor
 * handed off, on the log's fence of the earlier claim: until its own fence the partition
 * routes as "claim". The network fault test found a node that, re-registered after etcd's
 * election at the heal, handed a partition off on its old fence while its new claim was
 * still catching up; that claim then finished over the handoff's record, and the node
 * handed the partition to its new holder again and again, each time replacing the
 * holder's rows.
 */
import { describe, expect, it } from "vitest";
import { ClusterMember } from "../../src/cluster/cluster-member.js";
import { MemoryCoordination, MemoryEtcd } from "../../src/cluster/memory-coordination.js";
import { PartitionOwners, type PartitionLogGate } from "../../src/cluster/partition-owners.js";
import { FakeClock } from "../support/fake-clock.js";

const P = 4;

/** A changelog gate that fences at once, or when released while `held`; the partitions in `failOnce` fail their next fence (the log did not answer). */
class Gate implements PartitionLogGate {
  held = false;
  readonly failOnce = new Set<number>();
  /** The epoch each partition's log is fenced at here. */
  private readonly openAt = new Map<number, number>();
  private readonly waiting: Array<() => void> = [];
  isOpen(p: number, epoch: number): boolean {
    return this.openAt.get(p) === epoch;
  }
  async open(p: number, epoch: number): Promise<void> {
    if (this.held) await new Promise<void>((resolve) => this.waiting.push(resolve));
    if (this.failOnce.delete(p)) throw new Error("the log did not answer");
    this.openAt.set(p, epoch);
  }
  close(p: number): void {
    this.openAt.delete(p);
  }
  release(): void {
    this.held = false;
    for (const resume of this.waiting.splice(0)) resume();
  }
}

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
    const gate = new Gate();
    const owners = new PartitionOwners({ coordination, membership: member, partitions: P, clock, logger, rewatchMs: 1_000, log: gate });
    const claims: Array<[number, string | undefined]> = [];
    owners.onClaimed((p, from) => claims.push([p, from]));
    await settle(member.start());
    await settle(owners.start());
    return { member, owners, gate, claims };
  };
  const a = await node("a");
  const b = await node("b");
  await settle(new Promise<void>((r) => setImmediate(r)));
  /** Advances the simulated time until `done()` holds. */
  const until = (what: string, done: () => boolean) => settle((async () => {
    while (!done()) await new Promise((r) => setImmediate(r));
  })()).catch(() => {
    throw new Error(`never: ${what}`);
  });
  return { a, b, settle, until, store };
}

describe("PartitionOwners: a takeover is reported once per claim", () => {
  it("claims of a gone holder's partitions report it once, however many callers join the claim; other claims report none", async () => {
    const { a, b, settle } = await setup();
    // a holds every partition the ring gives it, and b its own: ordinary claims, no takeover.
    const mine = (o: typeof a.owners) => [...Array(P).keys()].filter((p) => o.desiredOwners()[p] === o.nodeId);
    for (const p of mine(a.owners)) await settle(a.owners.acquire(p));
    for (const p of mine(b.owners)) await settle(b.owners.acquire(p));
    expect([...a.claims, ...b.claims].every(([, from]) => from === undefined)).toBe(true);
    const aHeld = mine(a.owners);
    expect(aHeld.length).toBeGreaterThan(0);

    // a is gone; b takes its partitions over while its log fence waits, and several
    // callers (a call, the claim of recorded partitions, another call) join each claim.
    b.gate.held = true;
    await settle(a.member.stop());
    await settle(new Promise<void>((r) => setImmediate(r)));
    for (const p of aHeld) expect(b.owners.route(p)).toEqual({ kind: "claim", p });
    // The first partition's fence fails once after its etcd claim: the claim that finishes
    // it sees the record as b's own, and must still report the takeover (once).
    b.gate.failOnce.add(aHeld[0]!);
    const joined = aHeld.flatMap((p) => [b.owners.acquire(p), b.owners.acquire(p), b.owners.acquire(p)].map((c) => c.catch(() => undefined)));
    b.gate.release();
    await settle(Promise.all(joined));
    expect(b.owners.route(aHeld[0]!)).toEqual({ kind: "claim", p: aHeld[0] });
    await settle(b.owners.acquire(aHeld[0]!));
    expect(b.claims.filter(([, from]) => from !== undefined).sort()).toEqual(aHeld.map((p) => [p, "a"]).sort());
  });

  it("a claim at a new epoch routes as a claim until its own fence, not on the earlier claim's", async () => {
    const { a, settle, until, store } = await setup();
    const p = [...Array(P).keys()].find((q) => a.owners.desiredOwners()[q] === "a")!;
    const first = await settle(a.owners.acquire(p));
    expect(a.owners.route(p)).toMatchObject({ kind: "local", epoch: first });
    // etcd out of reach past the fence: a registers again as a new incarnation, and its old claim no longer counts.
    const before = a.member.registration().memberRevision;
    store.reachable = false;
    await until("a to fence itself", () => !a.member.serving());
    store.reachable = true;
    await until("a to register again", () => a.member.serving() && a.member.registration().memberRevision !== before);
    await until("a's old claim to route as a claim", () => a.owners.route(p).kind === "claim");
    // The new claim is recorded in etcd (the watch shows it) while its log fence waits.
    a.gate.held = true;
    const claimed = a.owners.acquire(p);
    await until("the new claim's record to reach a's view", () => (a.owners.entries().get(p)?.epoch ?? 0) > first!);
    expect(a.owners.route(p)).toEqual({ kind: "claim", p });
    a.gate.release();
    const second = await settle(claimed);
    expect(second).toBeGreaterThan(first!);
    expect(a.owners.route(p)).toMatchObject({ kind: "local", epoch: second });
  });
});
