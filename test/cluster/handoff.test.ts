/**
 * Graceful relocation with real processes (issue 13, tests 2 and 3): partitions move
 * with their rows when a node joins (scale out under load) and when a node stops
 * (SIGTERM drains: every partition is handed off before the node leaves), with a
 * producer and a worker running throughout. The checker (test/support/checker.ts): every
 * acknowledged enqueue ran and completed (0 lost), no SDK call failed, and a task ran
 * twice only if its lease lapsed (none does here: leases are 30 s). In the drain test
 * every queue has a per-key limit of 1, and no key ever runs twice at once, across every move.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Ring } from "../support/ring.js";
import { Checker, describeFailures, runProducer, runWorker } from "../support/checker.js";
import { clusterFixture, statusOf as statusOfNode } from "../support/cluster.js";
import { eventually, NodeProcess } from "../support/node-process.js";

const fixture = clusterFixture();
const { nodes, closers } = fixture;

function startNode(cluster: string, id: string, dataDir?: string): Promise<NodeProcess> {
  return NodeProcess.start({
    settings: { cluster_etcd: fixture.etcd.endpoints, cluster_name: cluster, node_id: id, cluster_member_ttl: "3s" },
    ...(dataDir ? { dataDir } : {}),
  }).then((n) => {
    nodes.push(n);
    return n;
  });
}

const statusOf = (node: NodeProcess) => statusOfNode(node, closers);
/** The nodes' default lease TTL (no lease lapses in these tests, so no task runs twice). */
const LEASE_TTL_MS = 30_000;

/** Where each queue's partition is held, as `node` sees it. */
async function holders(node: NodeProcess, queues: string[]): Promise<Map<string, string>> {
  const status = await statusOf(node);
  const ring = new Ring(["x"], 1, status.partitions);
  return new Map(queues.map((q) => [q, status.partitionStates[ring.partitionOf(q)]!.owner]));
}

const handoffs = (node: NodeProcess) => node.logs.map((l) => JSON.parse(l) as { msg?: string; ms?: number; tasks?: number }).filter((l) => l.msg === "partition handed off");

describe("handoff: partitions move with their rows (real processes)", { timeout: 120_000 }, () => {
  it("scale out under load: a third node joins, partitions move to it, nothing is lost and no call fails", async () => {
    const cluster = `h-${randomUUID().slice(0, 8)}`;
    const [n1, n2] = await Promise.all([startNode(cluster, "n1"), startNode(cluster, "n2")]);
    await eventually("both members active", async () => ((await statusOf(n1!)).members.length === 2 ? true : undefined), 15_000);
    const queues = Array.from({ length: 12 }, (_, i) => `hq${i}`);
    const producer = fixture.client(n1!);
    const checker = new Checker();
    const load = runProducer(checker, producer, queues);
    runWorker(checker, n2!.grpcAddress, queues, closers);
    await eventually("some work done before the join", async () => (checker.deliveries.length >= 200 ? true : undefined), 30_000);

    const n3 = await startNode(cluster, "n3");
    // The ring gives n3 a share; the holders hand those partitions over, with their rows.
    const want = new Ring(["n1", "n2", "n3"], 1);
    const toN3 = queues.filter((q) => want.ownerOf(q) === "n3");
    expect(toN3.length).toBeGreaterThan(0);
    await eventually("n3 to hold every partition the ring gives it", async () => {
      const held = await holders(n3, queues);
      return toN3.every((q) => held.get(q) === "n3") ? true : undefined;
    }, 30_000);
    const countAtMove = checker.acknowledged.size;
    await eventually("more work after the move", async () => (checker.acknowledged.size >= countAtMove + 200 ? true : undefined), 30_000);
    await load.stop();
    const verdict = await checker.verify(producer, LEASE_TTL_MS);

    expect(checker.failures, describeFailures(checker)).toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.deliveries).toBe(verdict.acknowledged);
    const moves = [...handoffs(n1!), ...handoffs(n2!)];
    const stalls = moves.map((m) => m.ms!).sort((a, b) => a - b);
    console.log(`scale out: ${moves.length} partitions handed to n3, stall per partition (ms) p50 ${Math.round(stalls[Math.floor(stalls.length / 2)]!)} ` +
      `max ${Math.round(stalls[stalls.length - 1]!)}; ${verdict.acknowledged} tasks acknowledged, all ran once, 0 failed calls`);
    expect(moves.length).toBeGreaterThanOrEqual(new Set(toN3.map((q) => want.partitionOf(q))).size);
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
