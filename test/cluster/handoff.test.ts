/**
 * Graceful relocation with real processes (issue 13, tests 2 and 3): partitions move
 * with their rows when a node joins (scale out under load: a 4th node joins a cluster of
 * three) and when a node stops (SIGTERM drains: every partition is handed off before the
 * node leaves), with a producer and workers running throughout. The checker
 * (test/support/checker.ts): every acknowledged enqueue ran and completed (0 lost), no SDK
 * call failed, and a task ran twice only if its lease lapsed (none does here: leases are
 * 30 s). Every queue has a per-key limit of 1, and no key ever runs twice at once, across
 * every move. The scale-out test prints each handed-off partition's stall (p50, p99, max)
 * and every node's memory (RSS) at the end.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Ring } from "../support/ring.js";
import { Checker, describeFailures, rssMiB, runProducer, runWorker } from "../support/checker.js";
import { clusterFixture, holders as holdersOn, queuePerPartition, startCluster, statusOf as statusOfNode } from "../support/cluster.js";
import { eventually, NodeProcess } from "../support/node-process.js";

const TTL_S = 3;
const fixture = clusterFixture();
const { nodes, closers } = fixture;

function startNode(cluster: string, id: string, dataDir?: string): Promise<NodeProcess> {
  return NodeProcess.start({
    settings: { cluster_etcd: fixture.etcd.endpoints, cluster_name: cluster, node_id: id, cluster_member_ttl: `${TTL_S}s` },
    ...(dataDir ? { dataDir } : {}),
  }).then((n) => {
    nodes.push(n);
    return n;
  });
}

const statusOf = (node: NodeProcess) => statusOfNode(node, closers);
const holders = (node: NodeProcess, queues: string[]) => holdersOn(node, queues, closers);
/** The nodes' default lease TTL (no lease lapses in these tests, so no task runs twice). */
const LEASE_TTL_MS = 30_000;

interface HandedOff { msg?: string; partition: number; to: string; ms: number; tasks: number }
const handoffs = (node: NodeProcess): HandedOff[] => node.logs.map((l) => JSON.parse(l) as Partial<HandedOff>)
  .filter((l): l is HandedOff => l.msg === "partition handed off");
/** The node's log lines of attempts ended by a lapsed lease (lease-lifecycle.ts). */
const leaseLapses = (node: NodeProcess) => node.logs.filter((l) => l.includes("lease expired: the worker stopped heartbeating"));
const failedHandoffs = (node: NodeProcess) => node.logs.filter((l) => l.includes("partition handoff failed")).length;
/** Nearest-rank percentile of ascending `sorted` (with fewer than 100 values, p99 is the maximum). */
const percentile = (sorted: number[], q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;

describe("handoff: partitions move with their rows (real processes)", { timeout: 120_000 }, () => {
  it("scale out under load: a 4th node joins, partitions move to it by handoff, nothing is lost, no call fails, the per-key limit holds", async () => {
    const ids = ["n1", "n2", "n3"];
    const { cluster, byId } = await startCluster(fixture.etcd, ids, nodes, TTL_S, closers);
    const [n1, n2, n3] = ids.map((id) => byId.get(id)!);
    // One queue per partition, so every partition is held (claimed by its first call, the
    // limit below) before n4 joins, and n4's whole share of the ring moves by handoff.
    const queues = queuePerPartition("sq");
    const producer = fixture.client(n1!);
    await Promise.all(queues.map((q) => producer.admin.setConcurrencyLimit(q, 1)));
    const before = await holders(n1!, queues);
    const ring3 = new Ring(ids, 1);
    expect(queues.filter((q) => before.get(q) !== ring3.ownerOf(q)), "every partition held by its ring owner").toEqual([]);
    const checker = new Checker();
    checker.phase = "three nodes";
    const load = runProducer(checker, producer, queues);
    runWorker(checker, n2!.grpcAddress, queues, closers);
    runWorker(checker, n3!.grpcAddress, queues, closers);
    await eventually("work in every queue before the join", async () => (checker.deliveries.length >= 2 * queues.length ? true : undefined), 30_000);

    checker.phase = "n4 joining";
    const n4 = await startNode(cluster, "n4");
    const joinedAt = performance.now();
    // The ring gives n4 a share; the holders hand those partitions over, with their rows.
    const ring4 = new Ring([...ids, "n4"], 1);
    const toN4 = [...new Set(queues.filter((q) => ring4.ownerOf(q) === "n4").map((q) => ring4.partitionOf(q)))].sort((a, b) => a - b);
    expect(toN4.length).toBeGreaterThan(0);
    const movers = [n1!, n2!, n3!];
    const moves = () => movers.flatMap((n, i) => handoffs(n).map((m) => ({ ...m, from: ids[i]! })));
    await eventually("n4 to hold every partition the ring gives it, each handed off", async () => {
      const held = await holders(n4, queues);
      const done = queues.every((q) => (ring4.ownerOf(q) === "n4") === (held.get(q) === "n4"));
      return done && moves().length >= toN4.length ? true : undefined;
    }, 30_000);
    const moveMs = performance.now() - joinedAt;
    checker.phase = "after the move";
    const countAtMove = checker.acknowledged.size;
    // Every queue gets new tasks (the producer goes round-robin), n4's through forwarding.
    await eventually("more work after the move", async () => (checker.acknowledged.size >= countAtMove + 2 * queues.length ? true : undefined), 30_000);
    await load.stop();
    const verdict = await checker.verify(producer, LEASE_TTL_MS);

    const all = [n1!, n2!, n3!, n4];
    const rss = await Promise.all(all.map((n) => rssMiB(n.child.pid!)));
    const done = moves();
    const stalls = done.map((m) => m.ms).sort((a, b) => a - b);
    const from = ids.map((id) => `${id} ${done.filter((m) => m.from === id).length}`).join(", ");
    console.log(`scale out 3 → 4: ${done.length} partitions handed to n4 (from ${from}; ${movers.map(failedHandoffs).reduce((a, b) => a + b)} failed attempts) in ${(moveMs / 1000).toFixed(1)} s, ` +
      `stall per partition (ms) p50 ${Math.round(percentile(stalls, 0.5))} p99 ${Math.round(percentile(stalls, 0.99))} max ${Math.round(stalls[stalls.length - 1]!)}; ` +
      `longest enqueue ${Math.round(checker.maxCallMs)} ms; ${verdict.acknowledged} tasks acknowledged, ${verdict.deliveries} runs, ` +
      `${checker.failures.length} failed SDK calls, max per key ${verdict.maxPerKey}; RSS at the end: ${all.map((_, i) => `n${i + 1} ${rss[i]} MiB`).join(", ")}`);
    expect(checker.failures, describeFailures(checker)).toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
    expect(verdict.deliveries).toBe(verdict.acknowledged);
    expect(verdict.maxPerKey).toBe(1);
    // Every task leased reached a worker: none waited for its lease to lapse (30 s). A
    // Lease refused after some of its queues were leased used to leave them so.
    expect(all.flatMap((n) => leaseLapses(n)), "no lease lapsed").toEqual([]);
    // Exactly n4's share moved, each partition once, each from its holder to n4.
    expect(done.map((m) => m.partition).sort((a, b) => a - b)).toEqual(toN4);
    expect(done.filter((m) => m.to !== "n4" || ring3.ownerOfPartition(m.partition) !== m.from)).toEqual([]);
    expect(done.reduce((sum, m) => sum + m.tasks, 0), "the moved partitions carried their rows").toBeGreaterThan(0);
    // A generous bound: a node with a few thousand tasks is far below it.
    for (const mib of rss) expect(mib).toBeLessThan(400);
  });

  it("SIGTERM drains: every partition is handed off before the node leaves; no SDK call fails; restarted, it takes its share back", async () => {
    const cluster = `h-${randomUUID().slice(0, 8)}`;
    const [n1, n2, n3] = await Promise.all([startNode(cluster, "n1"), startNode(cluster, "n2"), startNode(cluster, "n3")]);
    await eventually("three members active", async () => ((await statusOf(n1!)).members.length === 3 ? true : undefined), 15_000);
    const queues = Array.from({ length: 12 }, (_, i) => `dq${i}`);
    const producer = fixture.client(n2!);
    // One task per key at a time, in every queue: the limit must hold across the moves.
    for (const q of queues) await producer.admin.setConcurrencyLimit(q, 1);
    const checker = new Checker();
    const load = runProducer(checker, producer, queues);
    runWorker(checker, n3!.grpcAddress, queues, closers);
    await eventually("every queue in use", async () => (checker.acknowledged.size >= 300 ? true : undefined), 30_000);
    const onN1 = [...(await holders(n2!, queues))].filter(([, owner]) => owner === "n1").map(([q]) => q);
    expect(onN1.length).toBeGreaterThan(0);

    expect(await n1!.stop()).toBe(0);
    const drained = n1!.logs.some((l) => l.includes("drained: every partition handed off"));
    expect(drained).toBe(true);
    const afterDrain = await holders(n2!, queues);
    expect(onN1.every((q) => afterDrain.get(q) === "n2" || afterDrain.get(q) === "n3")).toBe(true);
    const count = checker.acknowledged.size;
    await eventually("work continues on the other nodes", async () => (checker.acknowledged.size >= count + 200 ? true : undefined), 30_000);

    // Back on its data directory: the ring gives it its share again.
    const back = await startNode(cluster, "n1", n1!.dataDir);
    await eventually("n1 to hold its share again", async () => {
      const held = await holders(back, queues);
      return onN1.every((q) => held.get(q) === "n1") ? true : undefined;
    }, 30_000);
    await load.stop();
    const verdict = await checker.verify(producer, LEASE_TTL_MS);
    expect(checker.failures, describeFailures(checker)).toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.deliveries).toBe(verdict.acknowledged);
    expect(verdict.maxPerKey).toBe(1);
    const stalls = handoffs(n1!).map((m) => m.ms!);
    console.log(`drain: n1 handed off ${stalls.length} partitions on SIGTERM (max stall ${Math.round(Math.max(...stalls))} ms); ` +
      `${verdict.acknowledged} tasks acknowledged, all ran once, 0 failed calls`);
  });
});
