/**
 * Owner and standby of a partition killed together (issue 14, test 6), with real
 * processes: one etcd, three nats-server, three conveyord with `cluster_nats`, snapshots
 * every 100 turns (so the busy partitions have snapshots and purged logs), a producer and
 * a worker on n1. n3 owns queue Q and n2 stands by for it; kill -9 of both at once leaves
 * n1, which holds no rows of Q: it takes Q's partition over cold, from the latest snapshot
 * plus the log after it. Then: 0 acknowledged tasks lost, every one completed, reruns only
 * after a lease lapse, the per-key limit of 1 held; the first acknowledged enqueue on Q
 * after the kill (printed), and n1's log says it rebuilt from a snapshot.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JetStreamChangeLog } from "../../src/changelog/jetstream-change-log.js";
import { Client, ConveyorError } from "../../src/index.js";
import { Checker, describeFailures, runProducer, runWorker } from "../support/checker.js";
import { clusterFixture, queuesOn, startCluster } from "../support/cluster.js";
import { startNats, type NatsCluster } from "../support/nats.js";
import { eventually, type NodeProcess } from "../support/node-process.js";
import { Ring } from "../support/ring.js";

const LEASE_TTL_MS = 30_000;
const fixture = clusterFixture();
const { nodes, closers } = fixture;
let nats: NatsCluster | undefined;

beforeAll(async () => {
  nats = await startNats({ size: 3 });
});
afterAll(async () => {
  await nats?.stop();
});

async function counter(node: NodeProcess, name: string): Promise<number> {
  const line = (await node.metrics()).split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

describe("cold failover: owner and standby killed together (real processes)", { timeout: 180_000 }, () => {
  it("the last node takes the partition over from its snapshot and the log; nothing acknowledged is lost", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, 5, closers, { cluster_nats: nats!.urls.join(","), cluster_snapshot_every: "100" });
    const ring = new Ring(ids, 1, 64);
    // Queues of n3 whose standby (the ring's successor) is n2: n1 has no rows of them.
    const onN3 = queuesOn(ids, 12).get("n3")!;
    const cold = onN3.filter((q) => ring.successorOf(ring.partitionOf(q)) === "n2").slice(0, 1);
    expect(cold.length, "a queue on n3 that n2 stands by for").toBe(1);
    const coldPartition = ring.partitionOf(cold[0]!);
    const others = [...queuesOn(ids, 1).values()].flat().filter((q) => !cold.includes(q));
    // The cold queue gets most of the load, so its partition has snapshots soon.
    const queues = [...cold, ...cold, ...cold, ...others];
    const producer = new Client({ address: byId.get("n1")!.grpcAddress, connectTimeoutMs: 60_000 });
    closers.push(() => producer.close());
    for (const q of queues) await producer.admin.setConcurrencyLimit(q, 1);
    const checker = new Checker();
    const load = runProducer(checker, producer, queues);
    runWorker(checker, byId.get("n1")!.grpcAddress, queues, closers);
    const n3 = byId.get("n3")!;
    const log = await JetStreamChangeLog.open({ servers: nats!.urls });
    closers.push(() => log.close());
    const snapshots = await log.openSnapshotStore();
    await eventually("a snapshot of the cold partition, and its log purged below an earlier one", async () =>
      (await snapshots.seqs(coldPartition)).length >= 1 && (await counter(n3, "conveyor_changelog_purged_entries_total")) > 0 ? true : undefined, 90_000);

    checker.phase = "n2 and n3 killed";
    const killedAt = performance.now();
    await Promise.all([n3.kill(), byId.get("n2")!.kill()]);
    const firstAck = await eventually("an acknowledged enqueue on the cold queues after the kill", async () => {
      let first = Infinity;
      for (const [id, at] of checker.acknowledgedAtMs) {
        if (at > killedAt && cold.includes(checker.acknowledged.get(id)!.split("/")[0]!)) first = Math.min(first, at);
      }
      return Number.isFinite(first) ? first : undefined;
    }, 60_000);
    // The other queues of the two dead nodes fail over too, each when its node's lease runs
    // out (the two leases end up to a keep-alive interval apart, and the first cold
    // acknowledgement may come before the other's): the failover phase ends once every
    // queue has an acknowledged enqueue after the kill.
    await eventually("an acknowledged enqueue on every queue after the kill", async () =>
      (queues.every((q) => [...checker.acknowledgedAtMs].some(([id, at]) => at > killedAt && checker.acknowledged.get(id)!.startsWith(`${q}/`))) ? true : undefined), 60_000);
    checker.phase = "after the cold failover";
    const atFailover = checker.acknowledged.size;
    await eventually("work to go on", async () => (checker.acknowledged.size >= atFailover + 100 ? true : undefined), 60_000);
    await load.stop();
    const verdict = await checker.verify(producer, LEASE_TTL_MS);

    const n1 = byId.get("n1")!;
    // n1 loads the snapshots either when it claims a cold partition, or just before, as the
    // standby the ring names once one of the two dead nodes' leases has run out.
    const loads = n1.logs.filter((l) => l.includes("loaded a partition's rows from its latest snapshot"));
    const rebuilt = new Set(loads.map((l) => Number(/"partition":(\d+)/.exec(l)?.[1])));
    const snapshotLoads = await counter(n1, "conveyor_changelog_catch_up_entries_total");
    console.log(`cold failover: first acknowledged enqueue on a partition whose owner and standby were killed ${Math.round(firstAck - killedAt)} ms after the kill; ` +
      `${rebuilt.size} partitions loaded from a snapshot on n1, then caught up from the log (${snapshotLoads} log entries applied in catch-ups); ` +
      `${verdict.acknowledged} tasks acknowledged, ${verdict.deliveries} runs, ${checker.failures.length} failed SDK calls`);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
    expect(verdict.maxPerKey).toBe(1);
    expect(rebuilt.has(coldPartition), `n1 loaded partition ${coldPartition} (queue ${cold[0]}) from its snapshot`).toBe(true);
    const unexpected = checker.failures.filter((f) => !(f.phase === "n2 and n3 killed" && f.error instanceof ConveyorError && f.error.code === "UNAVAILABLE"));
    expect(unexpected, describeFailures(checker)).toEqual([]);
  });
});
