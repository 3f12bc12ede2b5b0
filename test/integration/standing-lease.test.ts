/**
 * Standing Lease calls (LeaseRequest.standing on a session): the node answers each time it
 * leases deliveries and the call goes on, never handing out more than the worker granted
 * (max_deliveries plus SessionRequest.credits), and ends with an empty answer after
 * wait_ms without a delivery. The SDK's worker leases this way on a session, so a busy
 * worker makes a few Lease calls where it made one per answer; without sessions it makes
 * ordinary ones. Through a real node and real gRPC.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, Mux, Worker, json, newTask } from "../../src/index.js";
import { WorkerService, Outcome, type LeaseResponse } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { eventually, NodeProcess } from "../support/node-process.js";

/** Lease calls the node finished (each standing call counts once, however many answers it gave). */
function leaseCalls(metrics: string): number {
  return metrics.split("\n")
    .filter((l) => l.startsWith("conveyor_rpc_duration_seconds_count{") && l.includes('method="lease"'))
    .reduce((n, l) => n + Number(l.split(" ")[1]), 0);
}

describe("standing Lease calls", () => {
  let node: NodeProcess;
  let client: Client;
  beforeAll(async () => {
    node = await NodeProcess.start();
    client = new Client({ address: node.grpcAddress });
  });
  afterAll(async () => {
    client?.close();
    await node?.stop();
    node?.cleanup();
  });

  it("answers as often as it leases, within the credits granted, and ends empty after wait_ms idle", async () => {
    const channel = new RpcChannel({ address: node.grpcAddress });
    const rpc = channel.service(WorkerService, { session: true });
    try {
      // The first calls go unary while the session opens: call until one goes on it.
      await eventually("a call on the session", async () => {
        let attached = false;
        await rpc.lease({ workerId: "st-w", queues: [{ queue: "st-warm", weight: 1 }], maxDeliveries: 1, waitMs: 0, standing: true },
          { timeoutMs: 5_000, standing: { attached: () => (attached = true), answered: () => {} } });
        return attached || undefined;
      });
      const first = await Promise.all([1, 2, 3].map((i) => client.enqueue(newTask("st", json({ i })), { queue: "st" })));
      const answers: LeaseResponse[] = [];
      let grant: ((credits: number) => void) | undefined;
      const delivered = () => answers.reduce((n, a) => n + a.deliveries.length, 0);
      const call = rpc.lease({ workerId: "st-w", queues: [{ queue: "st", weight: 1 }], maxDeliveries: 1, waitMs: 2_000, standing: true }, {
        timeoutMs: 10_000,
        standing: { attached: (g) => (grant = g), answered: (r) => answers.push(r as LeaseResponse) },
      });
      await eventually("the first answer", async () => (answers.length > 0 ? true : undefined));
      expect(grant, "the call went on the session").toBeDefined();
      expect(delivered()).toBe(1);
      grant!(2);
      await eventually("the two granted deliveries", async () => (delivered() === 3 ? true : undefined));
      // No credit left: tasks enqueued now wait for another call.
      const later = await Promise.all([4, 5].map((i) => client.enqueue(newTask("st", json({ i })), { queue: "st" })));
      const last = await call;
      expect(last.deliveries, "the last answer, after wait_ms without a delivery, is empty").toHaveLength(0);
      expect(delivered(), "nothing beyond max_deliveries plus the credits").toBe(3);
      for (const t of later) expect((await client.getTask(t.id)).state).toBe("pending");
      const leased = answers.flatMap((a) => a.deliveries);
      expect(new Set(leased.map((d) => d.tasks[0]!.id))).toEqual(new Set(first.map((t) => t.id)));
      const settled = await rpc.settle({
        workerId: "st-w", settlements: leased.map((d) => ({ queue: "st", leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome: Outcome.SUCCESS })),
      });
      expect(settled.results.every((r) => !r.error)).toBe(true);
    } finally {
      channel.close();
    }
  });

  it("as a unary call it is an ordinary Lease: one answer", async () => {
    await client.enqueue(newTask("st", json({})), { queue: "st-unary" });
    const channel = new RpcChannel({ address: node.grpcAddress });
    try {
      const res = await channel.service(WorkerService).lease({ workerId: "st-u", queues: [{ queue: "st-unary", weight: 1 }], maxDeliveries: 5, waitMs: 1_000, standing: true }, { timeoutMs: 10_000 });
      expect(res.deliveries).toHaveLength(1);
    } finally {
      channel.close();
    }
  });

  it("a busy worker on a session makes a few Lease calls, not one per answer", async () => {
    const run = async (queue: string, sessions: boolean) => {
      const done = new Set<number>();
      const mux = new Mux().handle("busy", async (task) => {
        done.add(task.json<{ i: number }>().i);
      });
      const before = leaseCalls(await node.metrics());
      const worker = new Worker({ mux, address: node.grpcAddress, queues: [queue], concurrency: 4, logger: null, handleSignals: false, sessions }).start();
      try {
        for (let round = 0; round < 4; round++) {
          await Promise.all(Array.from({ length: 50 }, (_, k) => client.enqueue(newTask("busy", json({ i: round * 50 + k })), { queue })));
          await eventually(`round ${round} ran`, async () => (done.size === (round + 1) * 50 ? true : undefined), 30_000);
        }
      } finally {
        await worker.stop();
      }
      return leaseCalls(await node.metrics()) - before;
    };
    const standing = await run("st-busy", true);
    const ordinary = await run("st-busy-unary", false);
    // 200 tasks, at most 4 a Lease answer: at least 50 ordinary calls; standing calls end
    // only when idle for wait_ms, at a drain or a stop.
    expect(ordinary).toBeGreaterThanOrEqual(50);
    expect(standing).toBeLessThan(10);
  });
});
