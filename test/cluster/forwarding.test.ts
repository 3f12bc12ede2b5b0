/**
 * Any node serves any call (issue 13, tests 1 and 6), with real processes: one etcd and
 * three conveyord nodes on 127.0.0.1. A producer talks to one node only, a worker to
 * another only, and reads go through the third; the queues are spread over all three
 * owners. A checker records every acknowledged enqueue and every handler run: at the
 * end every acknowledged task ran (0 lost), and none ran twice (no lease lapsed here).
 * Then kill -9 of one node: its queues answer OWNER_DOWN (never served empty by
 * another node), the others keep serving, and after it restarts on its data directory
 * every task it held is there again.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Ring } from "../support/ring.js";
import { type Client, ConveyorError, Mux, Worker, json, newTask } from "../../src/index.js";
import { clusterFixture, queuesOn, startCluster as startClusterOf, statusOf as statusOfNode } from "../support/cluster.js";
import { eventually, type NodeProcess } from "../support/node-process.js";

const TTL_S = 3;
const fixture = clusterFixture();
const { nodes, closers, client } = fixture;

const startCluster = (ids: string[]) => startClusterOf(fixture.etcd, ids, nodes, TTL_S, closers);
const statusOf = (node: NodeProcess) => statusOfNode(node, closers);

describe("forwarding: any node serves any call (real processes)", { timeout: 90_000 }, () => {
  it("a producer on n1 and a worker on n2 drain queues owned by all three nodes; reads through n3 find every task", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(ids);
    const placed = queuesOn(ids, 3);
    const queues = [...placed.values()].flat();
    const producer = client(byId.get("n1")!);
    const acknowledged = new Set<string>();
    for (let round = 0; round < 10; round++) {
      const answers = await producer.enqueueBatch(queues.map((queue) => ({ task: newTask("job", json({ round, queue })), options: { queue } })));
      for (const r of answers) {
        if (r instanceof ConveyorError) throw r;
        acknowledged.add(r.id);
      }
    }
    const single = await producer.enqueue(newTask("job", json({ single: true })), { queue: queues[queues.length - 1]! });
    acknowledged.add(single.id);
    expect(acknowledged.size).toBe(queues.length * 10 + 1);

    // The partitions used were claimed by their ring owners, at an epoch every node sees.
    const status = await statusOf(byId.get("n3")!);
    for (const [owner, qs] of placed) {
      for (const q of qs) {
        const state = status.partitionStates[new Ring(ids, 1).partitionOf(q)]!;
        expect(state).toMatchObject({ owner, state: "owned", ownerDown: false });
        expect(state.epoch).toBeGreaterThan(0n);
      }
    }
    // Every queue is listed once, by the node that holds it, and the owners are the ring's.
    const listed = await client(byId.get("n3")!).admin.listQueues();
    for (const [owner, qs] of placed) {
      for (const q of qs) expect(listed.find((l) => l.name === q)?.owner).toBe(owner);
    }

    const ran = new Map<string, number>();
    const worker = new Worker({
      address: byId.get("n2")!.grpcAddress, queues, concurrency: 8, handleSignals: false, leaseWaitMs: 500, logger: null,
      mux: new Mux().handle("job", async (task) => void ran.set(task.id, (ran.get(task.id) ?? 0) + 1)),
    });
    closers.push(() => worker.stop());
    worker.start();
    await eventually("every acknowledged task to run", async () => ([...acknowledged].every((id) => ran.has(id)) ? true : undefined), 30_000);
    expect([...ran.values()].every((n) => n === 1)).toBe(true);
    expect([...ran.keys()].filter((id) => !acknowledged.has(id))).toEqual([]);

    // The cluster's metrics: n1 forwarded the producer's calls; each node counts what it holds and its claims.
    const m1 = await byId.get("n1")!.metrics();
    expect(Number(/^conveyor_cluster_forwarded_calls_total\{method="EnqueueBatch"\} (\d+)/m.exec(m1)?.[1] ?? 0)).toBeGreaterThan(0);
    expect(m1).toMatch(/^conveyor_cluster_members\{state="active"\} 3$/m);
    for (const [id, node] of byId) {
      const text = await node.metrics();
      const held = Number(/^conveyor_cluster_partitions_held (\d+)/m.exec(text)?.[1]);
      const claims = Number(/^conveyor_cluster_partition_claims_total (\d+)/m.exec(text)?.[1]);
      expect(held).toBe(new Set(placed.get(id)!.map((q) => new Ring(ids, 1).partitionOf(q))).size);
      expect(claims).toBe(held);
    }

    // Reads by id through a third node: the id names its partition, so it goes straight to the owner.
    const reader = client(byId.get("n3")!);
    const sample = [...acknowledged].slice(0, 20);
    await eventually("the settles to be committed", async () => {
      const tasks = await Promise.all(sample.map((id) => reader.getTask(id)));
      return tasks.every((t) => t.state === "completed") ? true : undefined;
    });
    // A caller-chosen id is found by asking the members.
    const chosen = `order-${randomUUID()}`;
    await producer.enqueue(newTask("job", json({})), { queue: placed.get("n2")![0]!, taskId: chosen });
    expect((await reader.getTask(chosen)).id).toBe(chosen);
    await expect(reader.getTask(`missing-${randomUUID()}`)).rejects.toMatchObject({ reason: "TASK_NOT_FOUND" });
  });

  it("kill -9 of a node: its queues answer OWNER_DOWN, the rest keep serving; restarted, it has every task", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(ids);
    const placed = queuesOn(ids, 2);
    const producer = client(byId.get("n1")!);
    const onN3 = new Map<string, string>();
    for (const q of placed.get("n3")!) for (let i = 0; i < 5; i++) onN3.set((await producer.enqueue(newTask("job", json({ i })), { queue: q })).id, q);

    const n3 = byId.get("n3")!;
    await n3.kill();
    // Until etcd drops n3's registration (TTL), calls for its queues fail to reach it; then OWNER_DOWN, never an empty answer.
    const down = await eventually("n3's queue to answer OWNER_DOWN", async () => {
      const error = await producer.enqueue(newTask("job", json({})), { queue: placed.get("n3")![0]! }).then(() => undefined, (e: unknown) => e);
      return error instanceof ConveyorError && error.reason === "OWNER_DOWN" ? error : undefined;
    }, 15_000);
    expect(down.message).toContain("n3");
    expect(down.code).toBe("UNAVAILABLE");
    // The other nodes' queues are served as before.
    for (const q of [...placed.get("n1")!, ...placed.get("n2")!]) {
      expect((await producer.enqueue(newTask("job", json({})), { queue: q })).state).toBe("pending");
    }
    // Back on its data directory: it claims its partitions again, and every task is there.
    const back = await n3.restart();
    nodes.push(back);
    const reader = client(byId.get("n2")!);
    await eventually("n3's tasks to be served again", async () => {
      const found = await Promise.all([...onN3.keys()].map((id) => reader.getTask(id).then(() => true, () => false)));
      return found.every(Boolean) ? true : undefined;
    }, 15_000);
    const listed = await reader.admin.listQueues();
    for (const q of placed.get("n3")!) expect(listed.find((l) => l.name === q)).toMatchObject({ owner: "n3" });
  });
  it("forwarding costs one extra hop: serial enqueues through a non-owner, against the owner directly (printed)", async () => {
    const ids = ["n1", "n2"];
    const { byId } = await startCluster(ids);
    const queue = queuesOn(ids, 1).get("n2")![0]!;
    const direct = client(byId.get("n2")!);
    const forwarded = client(byId.get("n1")!);
    await direct.enqueue(newTask("job", json({})), { queue }); // the owner claims its partition
    const timeSerial = async (c: Client, n: number) => {
      const ms: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await c.enqueue(newTask("job", json({ i })), { queue });
        ms.push(performance.now() - t0);
      }
      return ms.sort((a, b) => a - b);
    };
    await timeSerial(forwarded, 50); // warm the peer channel
    // Interleaved rounds, so that machine noise hits both alike.
    const d: number[] = [];
    const f: number[] = [];
    for (let round = 0; round < 4; round++) {
      d.push(...await timeSerial(direct, 100));
      f.push(...await timeSerial(forwarded, 100));
    }
    const p = (list: number[], q: number) => [...list].sort((a, b) => a - b)[Math.floor(q * (list.length - 1))]!;
    console.log(`forwarding overhead, serial enqueue (400 each, one run): direct p50 ${p(d, 0.5).toFixed(2)} ms p99 ${p(d, 0.99).toFixed(2)} ms; ` +
      `forwarded p50 ${p(f, 0.5).toFixed(2)} ms p99 ${p(f, 0.99).toFixed(2)} ms; ratio p50 ${(p(f, 0.5) / p(d, 0.5)).toFixed(2)}x`);
    // One extra hop on loopback, not an order of magnitude.
    expect(p(f, 0.5)).toBeLessThan(p(d, 0.5) * 5 + 5);
  });
});
