/**
 * Issue 13, test 5, with real processes (one etcd, conveyord nodes): a worker parked on
 * a queue's owner while that queue's partition is handed off (a third node joins) is
 * told at once (LeaseResponse.relocated), polls again without backing off, follows the
 * route to the new owner, and gets the queue's next task, enqueued right after the move,
 * from the new owner within 1 s (its long poll is 20 s: without the hint and the new
 * owner's loop, the task would wait for that poll to end). The same when the owner drains
 * (SIGTERM) and the queue moves to a node the worker already has a poll parked on: the
 * queue cannot wait for that poll's next call, so the loop polls it at once with a
 * top-up call.
 */
import { describe, expect, it } from "vitest";
import { AdminService, type WorkerInfo } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { Mux, Worker, json, newTask } from "../../src/index.js";
import { clusterFixture, startCluster, statusOf } from "../support/cluster.js";
import { eventually, NodeProcess } from "../support/node-process.js";
import { Ring } from "../support/ring.js";

const fixture = clusterFixture();
const { nodes, closers, client } = fixture;

/** A queue that n2 owns in a ring of n1, n2 and n3 owns once n3 joins. */
function queueMovingToN3(): string {
  const before = new Ring(["n1", "n2"], 1);
  const after = new Ring(["n1", "n2", "n3"], 1);
  for (let i = 0; ; i++) {
    const q = `rq${i}`;
    if (before.ownerOf(q) === "n2" && after.ownerOf(q) === "n3") return q;
  }
}

/** A queue that n2 owns in a ring of n1, n2 and n3 and n3 owns once n2 has left, and one n3 owns throughout. */
function queuesForDrain(): { fromN2: string; onN3: string } {
  const all = new Ring(["n1", "n2", "n3"], 1);
  const without = new Ring(["n1", "n3"], 1);
  let fromN2: string | undefined;
  let onN3: string | undefined;
  for (let i = 0; fromN2 === undefined || onN3 === undefined; i++) {
    const q = `dq${i}`;
    if (all.ownerOf(q) === "n2" && without.ownerOf(q) === "n3") fromN2 ??= q;
    if (all.ownerOf(q) === "n3") onN3 ??= q;
  }
  return { fromN2, onN3 };
}

/** The worker's Lease calls parked now, as the cluster lists them through `node`. */
async function parked(node: NodeProcess, workerId: string): Promise<WorkerInfo[]> {
  const channel = new RpcChannel({ address: node.grpcAddress });
  try {
    const { workers } = await channel.service(AdminService).listWorkers({}, { timeoutMs: 5_000 });
    return workers.filter((w) => w.workerId === workerId && w.polling);
  } finally {
    channel.close();
  }
}

describe("a Lease parked during a handoff is relocated (real processes)", { timeout: 90_000 }, () => {
  it("a worker parked on the old owner gets the next task from the new owner within 1 s", async () => {
    const { cluster, byId } = await startCluster(fixture.etcd, ["n1", "n2"], nodes, 3, closers);
    const [n1, n2] = [byId.get("n1")!, byId.get("n2")!];
    const queue = queueMovingToN3();
    const startedAt = new Map<string, number>();
    const infos: Array<{ at: number; message: string }> = [];
    const worker = new Worker({
      address: n1.grpcAddress, queues: [queue], concurrency: 4, handleSignals: false, leaseWaitMs: 20_000,
      logger: { info: (message) => infos.push({ at: Date.now(), message }), warn: () => {} },
      mux: new Mux().handle("job", (task) => void startedAt.set(task.id, Date.now())),
    });
    closers.push(() => worker.stop());
    worker.start();
    // The worker, told of n1, parks on n2, the queue's owner.
    const producer = client(n1);
    const { id: first } = await producer.enqueue(newTask("job", json({ n: 1 })), { queue });
    await eventually("the first task to run", async () => startedAt.get(first), 15_000);
    await eventually("the worker to park on n2", async () => ((await parked(n2, worker.workerId)).some((w) => w.queues.includes(queue)) ? true : undefined), 15_000);

    const n3 = await NodeProcess.start({
      settings: { cluster_etcd: fixture.etcd.endpoints, cluster_name: cluster, node_id: "n3", cluster_member_ttl: "3s" },
    });
    nodes.push(n3);
    const p = new Ring(["x"], 1).partitionOf(queue);
    await eventually(`n3 to hold partition ${p} of ${queue}`, async () => ((await statusOf(n3, closers)).partitionStates[p]?.owner === "n3" ? true : undefined), 30_000);

    const enqueuedAt = Date.now();
    const { id } = await producer.enqueue(newTask("job", json({ n: 2 })), { queue });
    const ranAt = await eventually("the task enqueued after the move to run", async () => startedAt.get(id), 10_000);
    const pickupMs = ranAt - enqueuedAt;
    process.stdout.write(`relocation: pickup of the first task enqueued after the move to n3: ${pickupMs} ms (long poll 20 s)\n`);
    expect(pickupMs).toBeLessThan(1_000);
    // The parked call was ended with the hint (not a timeout), and the worker now polls n3.
    expect(infos.map((i) => i.message)).toContainEqual(expect.stringContaining(`queues ${queue} is moving off the node at ${n2.grpcAddress}`));
    expect(infos.map((i) => i.message)).toContainEqual(`polling the node at ${n3.grpcAddress} for queues ${queue} (their owner)`);
    await eventually("the worker to park on n3", async () => ((await parked(n3, worker.workerId)).some((w) => w.queues.includes(queue)) ? true : undefined), 10_000);
  });

  it("a worker parked on a draining owner gets the next task from the new owner within 1 s, though it already polls that node", async () => {
    const { byId } = await startCluster(fixture.etcd, ["n1", "n2", "n3"], nodes, 3, closers);
    const [n1, n2, n3] = [byId.get("n1")!, byId.get("n2")!, byId.get("n3")!];
    const { fromN2, onN3 } = queuesForDrain();
    const startedAt = new Map<string, number>();
    const worker = new Worker({
      address: n1.grpcAddress, queues: [fromN2, onN3], concurrency: 4, handleSignals: false, leaseWaitMs: 20_000, logger: null,
      mux: new Mux().handle("job", (task) => void startedAt.set(task.id, Date.now())),
    });
    closers.push(() => worker.stop());
    worker.start();
    await eventually("the worker to park on n2 and on n3", async () => (
      (await parked(n2, worker.workerId)).some((w) => w.queues.includes(fromN2)) && (await parked(n3, worker.workerId)).some((w) => w.queues.includes(onN3)) ? true : undefined), 15_000);

    // SIGTERM: n2 hands every partition off before it exits (n2's queue goes to n3).
    expect(await n2.stop()).toBe(0);
    const p = new Ring(["x"], 1).partitionOf(fromN2);
    await eventually(`n3 to hold partition ${p} of ${fromN2}`, async () => ((await statusOf(n3, closers)).partitionStates[p]?.owner === "n3" ? true : undefined), 15_000);

    const enqueuedAt = Date.now();
    const { id } = await client(n1).enqueue(newTask("job", json({})), { queue: fromN2 });
    const ranAt = await eventually("the task enqueued after the drain to run", async () => startedAt.get(id), 10_000);
    const pickupMs = ranAt - enqueuedAt;
    process.stdout.write(`relocation: pickup of the first task enqueued after n2 drained, on a node already polled: ${pickupMs} ms (long poll 20 s)\n`);
    expect(pickupMs).toBeLessThan(1_000);
  });
});
