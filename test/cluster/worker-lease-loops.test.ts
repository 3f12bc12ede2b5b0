/**
 * The SDK worker polls each owner of its queues (issue 13, "Workers"), with real
 * processes: one etcd and three conveyord nodes. A worker told only of n1, with queues
 * held by all three nodes, parks a long poll on each owner, so a task enqueued (through
 * n2) on a queue n3 holds is picked up at once, not at the next poll of n1 (which would
 * be `leaseWaitMs` later: 20 s here, to make the difference unmistakable). Its stop fences
 * every node it polled; a loop whose node dies gives its queue back and the worker polls
 * the node again once it is back; its loops share one budget of `concurrency` slots.
 */
import { describe, expect, it } from "vitest";
import { AdminService, type WorkerInfo } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { Mux, Worker, json, newTask } from "../../src/index.js";
import { clusterFixture, queuesOn, startCluster } from "../support/cluster.js";
import { eventually, type NodeProcess } from "../support/node-process.js";

const TTL_S = 3;
const IDS = ["n1", "n2", "n3"];
const fixture = clusterFixture();
const { nodes, closers, client } = fixture;

/** The worker's entries as every node lists them (one per node it calls), merged through `node`. */
async function entriesOf(node: NodeProcess, workerId: string): Promise<WorkerInfo[]> {
  const channel = new RpcChannel({ address: node.grpcAddress });
  try {
    const { workers } = await channel.service(AdminService).listWorkers({}, { timeoutMs: 5_000 });
    return workers.filter((w) => w.workerId === workerId);
  } finally {
    channel.close();
  }
}

/** Whether some node has a Lease call of the worker parked on `queue`. */
const parkedOn = (entries: WorkerInfo[], queue: string) => entries.some((e) => e.polling && e.queues.includes(queue));

describe("the SDK worker polls each owner of its queues (real processes)", { timeout: 90_000 }, () => {
  it("a worker told only of n1 picks up a task enqueued through n2 on n3's queue at once, and its stop fences every node", async () => {
    const { byId } = await startCluster(fixture.etcd, IDS, nodes, TTL_S, closers);
    const placed = queuesOn(IDS, 2);
    const queues = [...placed.values()].flat();
    const onN3 = placed.get("n3")![0]!;
    const startedAt = new Map<string, number>();
    const worker = new Worker({
      address: byId.get("n1")!.grpcAddress, queues, concurrency: 10, handleSignals: false, leaseWaitMs: 20_000, logger: null,
      mux: new Mux().handle("job", (task) => void startedAt.set(task.id, Date.now())),
    });
    closers.push(() => worker.stop());
    worker.start();
    const n1 = byId.get("n1")!;
    // Idle, with a Lease parked on n1 (the node it was told of) for n1's queues.
    await eventually("the worker to park on n1", async () => (parkedOn(await entriesOf(n1, worker.workerId), placed.get("n1")![0]!) ? true : undefined), 15_000);

    const enqueuedAt = Date.now();
    const { id } = await client(byId.get("n2")!).enqueue(newTask("job", json({})), { queue: onN3 });
    // Bounded well under leaseWaitMs: without a loop on n3 the task waits for n1's poll to end.
    const ranAt = await eventually("the handler to run", async () => startedAt.get(id), 5_000);
    const pickupMs = ranAt - enqueuedAt;
    process.stdout.write(`pickup latency of a task on n3's queue, enqueued through n2: ${pickupMs} ms\n`);
    expect(pickupMs).toBeLessThan(1_000);

    // Idle again, parked on every owner: each queue has a Lease call parked on its node.
    await eventually("a Lease parked for every queue", async () => {
      const entries = await entriesOf(n1, worker.workerId);
      return entries.length === 3 && queues.every((q) => parkedOn(entries, q)) ? entries : undefined;
    }, 10_000);

    // A graceful stop reaches every node polled: each forgets the worker at once
    // (unfenced, a node would list it for a minute after its last call).
    await worker.stop();
    await eventually("every node to forget the worker", async () => ((await entriesOf(byId.get("n2")!, worker.workerId)).length === 0 ? true : undefined), 3_000);
  });

  it("an owner killed: its queue goes back to the main loop; restarted, the worker polls it again and runs its tasks", async () => {
    const { byId } = await startCluster(fixture.etcd, IDS, nodes, TTL_S, closers);
    const placed = queuesOn(IDS, 1);
    const [onN1, onN3] = [placed.get("n1")![0]!, placed.get("n3")![0]!];
    const ran = new Set<string>();
    const warnings: string[] = [];
    const worker = new Worker({
      address: byId.get("n1")!.grpcAddress, queues: [onN1, onN3], concurrency: 4, handleSignals: false, leaseWaitMs: 2_000,
      logger: { info: () => {}, warn: (m) => warnings.push(m) },
      mux: new Mux().handle("job", (task) => void ran.add(task.id)),
    });
    closers.push(() => worker.stop());
    worker.start();
    const n1 = byId.get("n1")!;
    await eventually("the worker to park on n3", async () => (parkedOn(await entriesOf(n1, worker.workerId), onN3) ? true : undefined), 15_000);

    await byId.get("n3")!.kill();
    await eventually("the loop on n3 to give its queue back", async () => (warnings.some((w) => w.includes(`cannot serve queues ${onN3}`)) ? true : undefined), 10_000);

    nodes.push(await byId.get("n3")!.restart());
    const { id } = await client(byId.get("n2")!).enqueue(newTask("job", json({})), { queue: onN3 });
    await eventually("the task on n3's queue to run", async () => (ran.has(id) ? true : undefined), 20_000);
    await eventually("the worker to park on n3 again, for its queue alone", async () => {
      const entries = await entriesOf(n1, worker.workerId);
      return entries.some((e) => e.polling && e.queues.length === 1 && e.queues[0] === onN3) ? true : undefined;
    }, 15_000);
  });

  it("loops on two nodes never run more handlers at once than the worker's concurrency", async () => {
    const { byId } = await startCluster(fixture.etcd, IDS, nodes, TTL_S, closers);
    const placed = queuesOn(IDS, 1);
    const queues = [placed.get("n1")![0]!, placed.get("n2")![0]!];
    const producer = client(byId.get("n3")!);
    const ids = new Set<string>();
    for (const queue of queues) {
      const answers = await producer.enqueueBatch(Array.from({ length: 30 }, (_, i) => ({ task: newTask("job", json({ i })), options: { queue } })));
      for (const a of answers) if (!(a instanceof Error)) ids.add(a.id);
    }
    expect(ids.size).toBe(60);
    let running = 0;
    let most = 0;
    const ran = new Set<string>();
    const worker = new Worker({
      address: byId.get("n1")!.grpcAddress, queues, concurrency: 2, handleSignals: false, leaseWaitMs: 20_000, logger: null,
      mux: new Mux().handle("job", async (task) => {
        running += 1;
        most = Math.max(most, running);
        // Work that takes a while, so that overlapping handlers would be seen.
        await new Promise((resolve) => setTimeout(resolve, 20));
        running -= 1;
        ran.add(task.id);
      }),
    });
    closers.push(() => worker.stop());
    worker.start();
    await eventually("every task to run", async () => ([...ids].every((id) => ran.has(id)) ? true : undefined), 30_000);
    expect(most).toBe(2);
    // Both owners were polled directly: each has a Lease of the worker parked for its own
    // queue. (n3 knows the worker too, from its registration, but has no Lease of it.)
    await eventually("a Lease parked on each owner", async () => {
      const entries = await entriesOf(byId.get("n1")!, worker.workerId);
      return queues.every((q) => parkedOn(entries, q)) && entries.filter((e) => e.polling).every((e) => e.queues.length === 1) ? true : undefined;
    }, 10_000);
  });
});
