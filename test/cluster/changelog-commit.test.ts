/**
 * Cluster part 2, the write path (issue 14), with real processes: one etcd, three
 * nats-server with JetStream, three conveyord with `cluster_nats`, a producer on n1 and a
 * worker on n2 over queues of all three nodes. Read back from JetStream afterwards:
 * - every partition's log starts with a fence (its owner's claim), and a node restarted
 *   after kill -9 fences its partitions again before it writes;
 * - every acknowledged enqueue is there (also those of the node killed with -9), every
 *   delivery the worker got is there with its lease id (deliveries are logged before they
 *   are returned), and every task ends completed on the log.
 * And a node refuses to start on a nats-server whose max_payload cannot take a turn.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/index.js";
import { decodeTurn } from "../../src/changelog/change-record.js";
import type { LogEntry } from "../../src/changelog/changelog.js";
import { JetStreamChangeLog } from "../../src/changelog/jetstream-change-log.js";
import { partitionOf } from "../../src/cluster/partitions.js";
import { Checker, describeFailures, runProducer, runWorker } from "../support/checker.js";
import { clusterFixture, queuesOn, startCluster } from "../support/cluster.js";
import { startNats, type NatsCluster } from "../support/nats.js";
import { eventually, NodeProcess } from "../support/node-process.js";

const PARTITIONS = 64;
const fixture = clusterFixture();
const { nodes, closers } = fixture;
let nats: NatsCluster | undefined;

beforeAll(async () => {
  nats = await startNats({ size: 3 });
});
afterAll(async () => {
  await nats?.stop();
});

/** Every entry of partition p, in order. */
async function entriesOf(log: JetStreamChangeLog, p: number): Promise<LogEntry[]> {
  const out: LogEntry[] = [];
  for (let from = 1; ; ) {
    const page = await log.read(p, from, 1_000);
    if (page.length === 0) return out;
    out.push(...page);
    from = page.at(-1)!.seq + 1;
  }
}

describe("the changelog on the write path (real processes: etcd, three nats-server, three nodes)", { timeout: 180_000 }, () => {
  it("every acknowledged enqueue, delivery and completion is on its partition's log; a restarted node fences again", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, 5, closers, { cluster_nats: nats!.urls.join(",") });
    const placed = queuesOn(ids, 2);
    const queues = [...placed.values()].flat();
    const producer = fixture.client(byId.get("n1")!);
    const checker = new Checker();
    const load = runProducer(checker, producer, queues);
    runWorker(checker, byId.get("n2")!.grpcAddress, queues, closers);
    await eventually("work under way on every queue", async () => (checker.acknowledged.size >= 200 ? true : undefined), 60_000);

    // kill -9 a node: what it acknowledged must already be on the log.
    checker.phase = "n3 killed";
    const n3 = byId.get("n3")!;
    await n3.kill();
    const atKill = checker.acknowledged.size;
    await eventually("the other queues to keep going", async () => (checker.acknowledged.size >= atKill + 100 ? true : undefined), 60_000);
    checker.phase = "n3 restarted";
    const back = await n3.restart();
    nodes.push(back);
    const atRestart = checker.acknowledged.size;
    await eventually("n3's queues to take enqueues again", async () => (checker.acknowledged.size >= atRestart + 100 ? true : undefined), 60_000);
    checker.phase = "stopping";
    await load.stop();
    const verdict = await checker.verify(producer, 30_000);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    // While n3 was down (and until the producer's node reconnected to it) its queues
    // answered retryable UNAVAILABLE; nothing else failed.
    const aroundTheKill = (phase: string) => phase === "n3 killed" || phase === "n3 restarted";
    const unexpected = checker.failures.filter((f) => !(aroundTheKill(f.phase) && f.error instanceof ConveyorError && f.error.code === "UNAVAILABLE"));
    expect(unexpected, describeFailures(checker)).toEqual([]);

    const log = await JetStreamChangeLog.open({ servers: nats!.urls });
    closers.push(() => log.close());
    const inserted = new Set<string>();
    const completed = new Set<string>();
    const activated = new Set<string>();
    const n3Partitions = new Set(placed.get("n3")!.map((q) => partitionOf(q, PARTITIONS)));
    let records = 0;
    for (const p of new Set(queues.map((q) => partitionOf(q, PARTITIONS)))) {
      const entries = await entriesOf(log, p);
      expect(entries[0]?.kind, `partition ${p}'s log starts with its owner's fence`).toBe("fence");
      const fences = entries.filter((e) => e.kind === "fence").length;
      // n3's partitions: claimed at start, and again (a new epoch) after the restart.
      if (n3Partitions.has(p)) expect(fences, `partition ${p} (n3's) fenced again after the restart`).toBeGreaterThanOrEqual(2);
      for (const entry of entries) {
        if (entry.kind === "fence") continue;
        for (const bytes of entry.records) {
          records += 1;
          const turn = decodeTurn(bytes);
          expect(partitionOf(turn.queue, PARTITIONS)).toBe(p);
          for (const e of turn.effects) {
            if (e.kind === "insert") inserted.add(e.entry.id);
            else if (e.kind === "activate") activated.add(`${e.entry.id}/${e.entry.leaseId}`);
            else if (e.kind === "complete") completed.add(e.entry.id);
          }
        }
      }
    }
    const acknowledged = [...checker.acknowledged.keys()];
    console.log(`changelog: ${acknowledged.length} acknowledged tasks (${atKill} before the kill), ${checker.deliveries.length} deliveries, ` +
      `${records} turn records on the log, ${checker.failures.length} calls refused while n3 was down`);
    expect(acknowledged.filter((id) => !inserted.has(id)), "acknowledged enqueues missing from the log").toEqual([]);
    expect(checker.deliveries.map((d) => `${d.taskId}/${d.leaseId}`).filter((d) => !activated.has(d)), "deliveries missing from the log").toEqual([]);
    expect(acknowledged.filter((id) => !completed.has(id)), "completed tasks whose completion is missing from the log").toEqual([]);
  });

  it("a node refuses to start on a nats-server whose max_payload is too small for a turn, naming the setting", async () => {
    const small = await startNats({ size: 1, maxPayload: "1MB" });
    try {
      const started = Date.now();
      const err = await NodeProcess.start({
        settings: { cluster_etcd: fixture.etcd.endpoints, cluster_name: "small-payload", node_id: "s1", cluster_nats: small.urls.join(",") },
      }).then((n) => {
        nodes.push(n);
        return undefined;
      }, (e: unknown) => e);
      expect(String(err)).toMatch(/max_payload: 8MB/);
      // At once: a server set up wrong is not waited for like one not yet up.
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      await small.stop();
    }
  });
});
