/**
 * Named (shared) concurrency rules are counted cluster-wide (issue 13, "Cluster-wide
 * state"), with real processes: one etcd and three conveyord nodes, a queue on each node,
 * every task naming the same shared rule with a limit of N, and one SDK worker running
 * them all (so its handler sees every running task of the cluster and counts them
 * exactly). Without the rule's ledger each node would admit N and the count would reach
 * 3N. Then the ledger moves mid-run (SIGTERM of the node holding it): the new
 * ledger grants nothing until every member has reported, so the count stays ≤ N, and
 * every task still completes.
 */
import { describe, expect, it } from "vitest";
import { Mux, Worker, json, newTask, type Client } from "../../src/index.js";
import { clusterFixture, queuesOn, startCluster } from "../support/cluster.js";
import { eventually } from "../support/node-process.js";
import { Ring } from "../support/ring.js";

const TTL_S = 3;
const IDS = ["n1", "n2", "n3"];
const LIMIT = 3;
const PER_QUEUE = 12;
/** How long a task's handler works: long enough for tasks on different nodes to overlap. */
const WORK_MS = 120;
const fixture = clusterFixture();
const { nodes, closers, client } = fixture;

/** A worker over `queues` counting the tasks running at once (the cluster's, as it runs them all). */
function countingWorker(address: string, queues: string[]) {
  const stats = { running: 0, maxRunning: 0, done: new Set<string>() };
  const worker = new Worker({
    address, queues, concurrency: 4 * LIMIT * queues.length, handleSignals: false, leaseWaitMs: 2_000, logger: null,
    mux: new Mux().handle("job", async (task) => {
      stats.running += 1;
      stats.maxRunning = Math.max(stats.maxRunning, stats.running);
      try {
        await new Promise((resolve) => setTimeout(resolve, WORK_MS));
      } finally {
        stats.running -= 1;
        stats.done.add(task.id);
      }
    }),
  });
  closers.push(() => worker.stop());
  return { worker, stats };
}

/** PER_QUEUE tasks on each queue; their ids. */
async function enqueueAll(producer: Client, queues: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const queue of queues) for (let i = 0; i < PER_QUEUE; i++) ids.push((await producer.enqueue(newTask("job", json({ i })), { queue })).id);
  return ids;
}

describe("named (shared) rules are counted cluster-wide (real processes)", { timeout: 180_000 }, () => {
  it("three nodes' queues naming one shared rule never run more than its limit at once, also while the ledger's node stops (SIGTERM), and every task completes", async () => {
    const { byId } = await startCluster(fixture.etcd, IDS, nodes, TTL_S, closers);
    const queues = [...queuesOn(IDS, 1).values()].flat();
    // Task-type rules reach every member that is up (they are broadcast).
    await client(byId.get("n1")!).admin.setStrategies("job", [{ name: "tenant", expression: "'all'", maxRuns: LIMIT, limitStrategy: "GROUP_ROUND_ROBIN" }]);
    const ledgerNode = new Ring(IDS, 1).ownerOf("rule:@tenant");
    const survivor = IDS.find((id) => id !== ledgerNode)!;
    const producer = client(byId.get(survivor)!);

    // 1. Steady state: one worker runs every queue's tasks; it sees every running task.
    const first = await enqueueAll(producer, queues);
    const { worker, stats } = countingWorker(byId.get(survivor)!.grpcAddress, queues);
    const started = Date.now();
    worker.start();
    await eventually(`all ${first.length} tasks to complete`, async () => (first.every((id) => stats.done.has(id)) ? true : undefined), 60_000);
    process.stdout.write(`shared rule, limit ${LIMIT}, ${first.length} tasks of ${WORK_MS} ms on 3 nodes: ${Date.now() - started} ms, at most ${stats.maxRunning} running at once\n`);
    expect(stats.maxRunning).toBeLessThanOrEqual(LIMIT);
    // The budget was used, not starved: tasks of different nodes ran side by side.
    expect(stats.maxRunning).toBeGreaterThan(1);

    // 2. The ledger moves mid-run: its node drains and leaves (its queue moves too).
    stats.maxRunning = 0;
    const second = await enqueueAll(producer, queues);
    await eventually("a third of the second batch to complete", async () => (second.filter((id) => stats.done.has(id)).length >= second.length / 3 ? true : undefined), 60_000);
    expect(await byId.get(ledgerNode)!.stop()).toBe(0);
    await eventually(`all ${second.length} tasks to complete after ${ledgerNode} left`, async () => (second.every((id) => stats.done.has(id)) ? true : undefined), 60_000);
    process.stdout.write(`ledger moved off ${ledgerNode} mid-run: at most ${stats.maxRunning} running at once (limit ${LIMIT})\n`);
    expect(stats.maxRunning).toBeLessThanOrEqual(LIMIT);
  });
});
