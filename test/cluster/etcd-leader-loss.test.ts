/**
 * etcd's leader killed under load (issue 13, test 8), with real processes: a three-member
 * etcd, three conveyord nodes on it, a producer (SDK client on n1) and a worker (SDK
 * worker on n2) running over queues owned by all three, with a per-key limit of 1. The
 * raft leader (found with etcd's maintenance status API) gets kill -9. The owners keep
 * serving: no SDK call fails, and the longest enqueue around the election is printed;
 * etcd elects a new leader among the two left; membership recovers (every node sees the
 * same three active members at one ring version, none fenced itself, each reports the
 * dead etcd endpoint); the checker passes.
 */
import { describe, expect, it } from "vitest";
import { Client } from "../../src/index.js";
import { Checker, describeFailures, runProducer, runWorker } from "../support/checker.js";
import { clusterFixture, queuesOn, startCluster, statusOf } from "../support/cluster.js";
import { eventually } from "../support/node-process.js";

/**
 * The default member TTL: nodes fence themselves after 3/4 of it (3.75 s) without a
 * renewal, so the election and the first renewal after it must fit inside, with the
 * keep-alives sent to every etcd endpoint and repeated every 200 ms while unanswered
 * (etcd-keep-alives.ts, membership.ts).
 */
const TTL_S = 5;
const LEASE_TTL_MS = 30_000;
const fixture = clusterFixture({ etcdSize: 3 });
const { nodes, closers } = fixture;

describe("etcd leader loss (real processes, three-member etcd)", { timeout: 180_000 }, () => {
  it("kill -9 of etcd's leader under load: owners keep serving, membership recovers after the election, nothing is lost", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, TTL_S, closers);
    const all = ids.map((id) => byId.get(id)!);
    const placed = queuesOn(ids, 3);
    const queues = [...placed.values()].flat();
    const producer = new Client({ address: byId.get("n1")!.grpcAddress });
    closers.push(() => producer.close());
    for (const q of queues) await producer.admin.setConcurrencyLimit(q, 1);
    const checker = new Checker();
    const load = runProducer(checker, producer, queues);
    runWorker(checker, byId.get("n2")!.grpcAddress, queues, closers);
    await eventually("every queue in use before the kill", async () => (checker.acknowledged.size >= 150 ? true : undefined), 30_000);
    const before = await Promise.all(all.map((n) => statusOf(n, closers)));

    const leader = await eventually("etcd to name its leader", () => fixture.etcd.leader(), 10_000);
    const calmStallMs = checker.maxCallMs;
    checker.maxCallMs = 0;
    checker.phase = `etcd leader ${leader.name} killed`;
    const killedAt = performance.now();
    await leader.kill();
    const next = await eventually("a new etcd leader among the two members left", async () => {
      const l = await fixture.etcd.leader();
      return l && l !== leader ? l : undefined;
    }, 30_000);
    const electionMs = performance.now() - killedAt;
    const count = checker.acknowledged.size;
    await eventually("work to go on after the election", async () => (checker.acknowledged.size >= count + 200 ? true : undefined), 30_000);
    const views = await eventually("every node to agree on three active members at one ring version, seeing one etcd endpoint down", async () => {
      const v = await Promise.all(all.map((n) => statusOf(n, closers)));
      const agreed = v.every((s) => s.members.length === 3 && s.members.every((m) => m.state === 2) && s.ringVersion === v[0]!.ringVersion
        && s.etcd.filter((e) => !e.healthy).length === 1);
      return agreed ? v : undefined;
    }, 30_000);
    const stallMs = checker.maxCallMs;
    checker.phase = "after the election";
    await load.stop();
    const verdict = await checker.verify(producer, LEASE_TTL_MS);

    console.log(`etcd leader ${leader.name} killed: ${next.name} elected, seen ${Math.round(electionMs)} ms after the kill; ` +
      `max enqueue stall ${Math.round(stallMs)} ms from the kill to recovery (${Math.round(calmStallMs)} ms before it); ` +
      `${verdict.acknowledged} tasks acknowledged, ${verdict.deliveries} runs, ${checker.failures.length} failed SDK calls; ` +
      `fences ${views.map((v) => v.fences).join(", ")}`);
    expect(checker.failures, describeFailures(checker)).toEqual([]);
    // Owners kept serving: no node fenced itself, so each kept its registration.
    expect(views.map((v) => ({ fences: v.fences, serving: v.serving, incarnation: v.incarnation })))
      .toEqual(before.map((b) => ({ fences: 0, serving: true, incarnation: b.incarnation })));
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
    expect(verdict.maxPerKey).toBe(1);
  });
});
