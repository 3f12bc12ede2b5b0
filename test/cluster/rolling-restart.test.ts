/**
 * Rolling restart under load (issue 13, test 3), with real processes: three nodes on one
 * etcd, a producer (SDK client on n1) and a worker (SDK worker on n2) running throughout,
 * keyed tasks under a per-key limit of 1 in queues owned by all three nodes. Each node in
 * turn gets SIGTERM (it drains: every partition handed off), is started again on its data
 * directory and ports, and must be active and hold its share again before the next one
 * goes, the producer's and the worker's own nodes included. Then: no SDK call surfaced an
 * error (the SDK's own waits for a reconnect are allowed), the checker passes, and the
 * longest enqueue (the stall a producer saw) is printed, with each node's memory (RSS).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "../../src/index.js";
import { Checker, describeFailures, rssMiB, runProducer, runWorker } from "../support/checker.js";
import { clusterFixture, holders as holdersOn, queuesOn, startCluster, statusOf } from "../support/cluster.js";
import { startNats, type NatsCluster } from "../support/nats.js";
import { eventually, type NodeProcess } from "../support/node-process.js";

const TTL_S = 3;
/** The nodes' default lease TTL: a rerun sooner than this after the first run is unexplained. */
const LEASE_TTL_MS = 30_000;
const fixture = clusterFixture();
const { nodes, closers } = fixture;

const holders = (node: NodeProcess, queues: string[]) => holdersOn(node, queues, closers);

// Part 1's rolling restart, and the same with the changelog on (issue 14 test 7): a
// handoff then also carries the log position, the receiver fences the log, and standbys
// follow the partitions as they move.
describe.each([
  ["without a changelog", false],
  ["with the changelog (three nats-server)", true],
])("rolling restart under load (real processes), %s", { timeout: 240_000 }, (_name, withLog) => {
  let nats: NatsCluster | undefined;
  beforeAll(async () => {
    if (withLog) nats = await startNats({ size: 3 });
  });
  afterAll(async () => {
    await nats?.stop();
  });

  it("SIGTERM and restart each node in turn: no SDK call fails, nothing is lost, no task runs twice, the per-key limit holds", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, TTL_S, closers, nats ? { cluster_nats: nats.urls.join(",") } : {});
    const placed = queuesOn(ids, 3);
    const queues = [...placed.values()].flat();
    // The SDK waits for its node's return (a restart here takes seconds on a loaded machine).
    const producer = new Client({ address: byId.get("n1")!.grpcAddress, connectTimeoutMs: 60_000 });
    closers.push(() => producer.close());
    for (const q of queues) await producer.admin.setConcurrencyLimit(q, 1);
    const checker = new Checker();
    const load = runProducer(checker, producer, queues);
    runWorker(checker, byId.get("n2")!.grpcAddress, queues, closers);
    await eventually("every queue in use before the first restart", async () => (checker.acknowledged.size >= 150 ? true : undefined), 30_000);

    const current = new Map(byId);
    const restartMs: number[] = [];
    for (const id of ids) {
      const old = current.get(id)!;
      const other = current.get(ids.find((x) => x !== id)!)!;
      const share = placed.get(id)!;
      expect([...(await holders(other, share)).values()]).toEqual(share.map(() => id));
      const t0 = performance.now();
      checker.phase = `${id} stopping`;
      expect(await old.stop(), `${id} exits cleanly after its drain`).toBe(0);
      // On a failure, the node's own account of its drain (which partitions it still held, and why) is in the message.
      expect(old.logs.some((l) => l.includes("drained: every partition handed off")),
        `${id} drained before it left; its last log lines:\n${old.logs.slice(-12).join("\n")}`).toBe(true);
      checker.phase = `${id} restarting`;
      const back = await old.restart();
      checker.phase = `${id} back, taking its share`;
      nodes.push(back);
      current.set(id, back);
      await eventually(`${id} to be active and hold its share (${share.join(", ")}) again`, async () => {
        const held = await holders(back, share);
        const status = await statusOf(back, closers);
        return status.phase === "active" && share.every((q) => held.get(q) === id) ? true : undefined;
      }, 60_000);
      restartMs.push(performance.now() - t0);
      checker.phase = `after ${id}'s restart`;
      const count = checker.acknowledged.size;
      await eventually(`work to go on after ${id}'s restart`, async () => (checker.acknowledged.size >= count + 100 ? true : undefined), 30_000);
    }
    await load.stop();
    const verdict = await checker.verify(producer, LEASE_TTL_MS);

    const rss = await Promise.all(ids.map(async (id) => `${id} ${await rssMiB(current.get(id)!.child.pid!)} MiB`));
    console.log(`rolling restart ${withLog ? "with" : "without"} the changelog: 3 nodes restarted one at a time (SIGTERM → active with its share again: ${restartMs.map((ms) => Math.round(ms)).join(", ")} ms); ` +
      `${verdict.acknowledged} tasks acknowledged, ${verdict.deliveries} runs, max enqueue stall ${Math.round(checker.maxCallMs)} ms, ` +
      `${checker.failures.length} failed SDK calls, ` +
      `${checker.workerReports.length} errors the worker reported ` +
      `(${[...new Set(checker.workerReports.map((r) => r.context))].join(", ") || "none"}); RSS after: ${rss.join(", ")}`);
    expect(checker.failures, describeFailures(checker)).toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
    expect(verdict.maxPerKey).toBe(1);
    // A generous bound: a node with a few thousand tasks is far below it.
    for (const id of ids) expect(await rssMiB(current.get(id)!.child.pid!)).toBeLessThan(400);
  });
});
