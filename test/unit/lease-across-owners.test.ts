/**
 * A Lease never leaves a task leased to nobody when one of its queues changed hands
 * (found by the 3 → 4 scale-out test: tasks waited a whole 30 s lease TTL, until their
 * lease lapsed):
 * - across owners (forwarder.ts): a Lease naming queues of several nodes takes what is
 *   ready on each, this node's first; when one owner's part fails after deliveries were
 *   taken (its partition just moved, the old holder answers WRONG_OWNER), the call is
 *   answered with what was taken; with nothing taken, the error is the answer;
 * - on the owner (worker-service.ts): a Lease naming a queue this node does not hold is
 *   refused before the broker leases anything from the others.
 */
import { describe, expect, it } from "vitest";
import { ConveyorError, wrongOwner } from "../../src/base/errors.js";
import type { Ownership } from "../../src/cluster/ownership.js";
import { WorkerService } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import type { UnaryImpl } from "../../src/rpc/service-definition.js";
import { forwardingService } from "../../src/server/forwarding/forwarder.js";
import { workerService, type WorkerServiceDeps } from "../../src/server/worker-service.js";
import type { Peers } from "../../src/server/forwarding/peers.js";

/** Queue `<node>-<n>` is held by `<node>`; this node is "a", and every queue has a partition of its own. */
const queues = ["a-0", "b-0", "c-0"];
const holder = (p: number) => queues[p]!.split("-")[0]!;
const ownership: Ownership = {
  nodeId: "a", partitions: queues.length, ringVersion: 3,
  partitionOf: (q) => queues.indexOf(q),
  route: (p) => (holder(p) === "a" ? { kind: "local", p, epoch: 1 } : { kind: "remote", p, nodeId: holder(p), address: `${holder(p)}:1`, epoch: 1 }),
  acquire: async () => 1,
  holds: (p) => holder(p) === "a",
  refresh: async () => {},
  members: () => ["a", "b", "c"],
  whenMoved: async () => true,
};

const delivery = (queue: string) => ({ leaseId: `lease-${queue}`, queue, taskIds: [`task-${queue}`] });

/** The forwarding WorkerService of node "a": `answers` says what each node's Lease does. */
function leaseOn(answers: Record<string, () => Promise<unknown>>) {
  const local = Object.fromEntries(WorkerService.methods.map((m) => [m.localName, async () => {
    if (m.localName !== "lease") throw new Error(`${m.name} is not called here`);
    return answers["a"]!();
  }])) as unknown as UnaryImpl<typeof WorkerService>;
  const peers = { call: async (address: string) => answers[address.split(":")[0]!]!() } as unknown as Peers;
  const service = forwardingService(WorkerService, local, { ownership, peers, handoffWaitMs: 2_000, others: () => [] });
  const call = { request: { workerId: "w", queues: queues.map((queue) => ({ queue, weight: 1 })), maxDeliveries: 10, waitMs: 500, pollOwners: true }, metadata: { get: () => [] } };
  return (service as unknown as { lease(c: unknown): Promise<{ deliveries: Array<{ queue: string }>; routes: Array<{ queue: string }> }> }).lease(call);
}

describe("forwarder: a Lease across owners", () => {
  it("answers with the deliveries it took when a later owner's part fails", async () => {
    const res = await leaseOn({
      a: async () => ({ deliveries: [delivery("a-0")] }),
      b: async () => ({ deliveries: [delivery("b-0")] }),
      c: async () => { throw wrongOwner("queue \"c-0\"", "d", 4); },
    });
    expect(res.deliveries.map((d) => d.queue)).toEqual(["a-0", "b-0"]);
    expect(res.routes.map((r) => r.queue)).toEqual(["b-0", "c-0"]);
  });

  it("fails with the owner's error when nothing was taken", async () => {
    const failed = await leaseOn({
      a: async () => ({ deliveries: [] }),
      b: async () => { throw wrongOwner("queue \"b-0\"", "d", 4); },
      c: async () => ({ deliveries: [delivery("c-0")] }),
    }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ConveyorError);
    expect((failed as ConveyorError).reason).toBe("WRONG_OWNER");
  });
});

describe("worker service: a Lease naming a queue not held here", () => {
  it("is refused WRONG_OWNER before anything is leased", async () => {
    let leased = 0;
    const deps = {
      router: {
        checkHeld: (queue: string) => {
          if (holder(queues.indexOf(queue)) !== "a") throw wrongOwner(`queue "${queue}"`, holder(queues.indexOf(queue)), 3);
        },
        grainFor: () => { throw new Error("no grain in this test"); },
      },
      broker: { lease: async () => { leased += 1; return []; }, drain: () => {}, undrain: () => {} },
      workers: { seen: () => {}, registered: () => {}, heartbeat: () => {}, settled: () => {} },
      config: { leaseWaitMaxMs: 30_000, leaseTtlMs: 30_000, heartbeatIntervalMs: 10_000 },
    } as unknown as WorkerServiceDeps;
    const service = workerService(deps) as unknown as { lease(c: unknown): Promise<unknown> };
    const call = (names: string[]) => ({
      request: { workerId: "w", host: "", batchTypes: [], types: [], queues: names.map((queue) => ({ queue, weight: 1 })), maxDeliveries: 10, waitMs: 0 },
      on: () => {}, cancelled: false,
    });
    const refused = await service.lease(call(["a-0", "b-0"])).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConveyorError);
    expect((refused as ConveyorError).reason).toBe("WRONG_OWNER");
    expect(leased).toBe(0);
    await service.lease(call(["a-0"]));
    expect(leased).toBe(1);
  });
});
