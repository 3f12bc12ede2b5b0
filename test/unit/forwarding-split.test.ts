/**
 * A call whose items name queues held by several nodes is split by owner
 * (server/forwarding/forwarder.ts, `items`), each part served where it belongs, the
 * answers merged in request order. When one part fails, the others have been served by
 * their owners meanwhile, so an EnqueueBatch answers the failed part's items with the
 * error and keeps the others' outcomes: failing the whole call told the callers of stored
 * tasks they were refused (the zombie test, changelog-zombie.test.ts, found a batch sent
 * to a paused node answered FENCED as a whole while the node had forwarded part of it to a
 * live owner, which stored it). Settles still fail as a whole: they are idempotent, and
 * the SDK sends the whole call again.
 */
import { describe, expect, it } from "vitest";
import { ConveyorError, fenced } from "../../src/base/errors.js";
import type { Ownership } from "../../src/cluster/ownership.js";
import type { Route } from "../../src/cluster/placement.js";
import { TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { WorkerService } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { forwardingService } from "../../src/server/forwarding/forwarder.js";
import type { Peers } from "../../src/server/forwarding/peers.js";
import type { UnaryImpl } from "../../src/rpc/service-definition.js";

type Msg = Record<string, unknown>;

/** n1's view: queues "a…" are partition 0, held here (or refused: fenced); the rest partition 1, held by n2. */
function ownershipOf(state: { fencedHere: boolean }): Ownership {
  const route = (p: number): Route => (p === 0 ? { kind: "local", p, epoch: 3 } : { kind: "remote", p, nodeId: "n2", address: "127.0.0.1:2", epoch: 4 });
  return {
    nodeId: "n1", partitions: 2, ringVersion: 1,
    partitionOf: (q) => (q.startsWith("a") ? 0 : 1),
    route,
    acquire: async (p) => {
      if (p !== 0) return undefined;
      if (state.fencedHere) throw fenced("n1");
      return 3;
    },
    holds: (p) => p === 0 && !state.fencedHere,
    refresh: async () => {},
    members: () => ["n1", "n2"],
    whenMoved: async () => true,
  };
}

/** n2, as the peers channel reaches it: answers each item, or fails the call. */
function peersOf(state: { n2: "serves" | "unreachable" }, calls: Msg[]): Peers {
  return {
    call: async (_address: string, _service: unknown, method: { name: string }, request: Msg) => {
      calls.push(request);
      if (state.n2 === "unreachable") throw new ConveyorError("UNAVAILABLE", "UNREACHABLE", "the node at 127.0.0.1:2 that owns this call's queue is unreachable");
      if (method.name === "EnqueueBatch") return { items: (request["tasks"] as Msg[]).map((t) => ({ outcome: { case: "result", value: { id: `n2:${String(t["queue"])}` } } })) };
      return { results: (request["settlements"] as Msg[]).map((s) => ({ taskId: s["taskId"] })) };
    },
  } as unknown as Peers;
}

/** A bare service whose `methods` answer as this node would; the rest are not called here. */
const bare = <T>(methods: Record<string, (call: { request: Msg }) => Promise<Msg>>) =>
  new Proxy(methods, { get: (target, name) => target[String(name)] ?? (async () => { throw new Error(`${String(name)} is not used here`); }) }) as unknown as T;
const tasksImpl = bare<UnaryImpl<typeof TaskService>>({
  enqueueBatch: async (call) => ({ items: (call.request["tasks"] as Msg[]).map((t) => ({ outcome: { case: "result", value: { id: `n1:${String(t["queue"])}` } } })) }),
});
const workersImpl = bare<UnaryImpl<typeof WorkerService>>({
  settle: async (call) => ({ results: (call.request["settlements"] as Msg[]).map((s) => ({ taskId: s["taskId"] })) }),
});

const callOf = (request: Msg) => ({ request, metadata: { get: () => [] }, getDeadline: () => Date.now() + 5_000 }) as never;
const outcomes = (res: Msg) => (res["items"] as Array<{ outcome: { case: string; value: Msg } }>).map((i) => (i.outcome.case === "result" ? i.outcome.value["id"] : `error ${String(i.outcome.value["reason"])}`));

describe("a split call whose part fails", () => {
  const batch = { tasks: [{ queue: "a1" }, { queue: "b1" }, { queue: "a2" }, { queue: "b2" }] };

  it("EnqueueBatch: this node's part refused (fenced) fails its items only; the part its owner stored is answered as stored", async () => {
    const calls: Msg[] = [];
    const svc = forwardingService(TaskService, tasksImpl, { ownership: ownershipOf({ fencedHere: true }), peers: peersOf({ n2: "serves" }, calls), handoffWaitMs: 1_000, others: () => [] });
    const res = (await svc.enqueueBatch(callOf(batch))) as unknown as Msg;
    expect(outcomes(res)).toEqual(["error FENCED", "n2:b1", "error FENCED", "n2:b2"]);
    expect(calls).toHaveLength(1);
  });

  it("EnqueueBatch: the other owner unreachable fails its items only; this node's stored part is answered as stored", async () => {
    const svc = forwardingService(TaskService, tasksImpl, { ownership: ownershipOf({ fencedHere: false }), peers: peersOf({ n2: "unreachable" }, []), handoffWaitMs: 1_000, others: () => [] });
    const res = (await svc.enqueueBatch(callOf(batch))) as unknown as Msg;
    expect(outcomes(res)).toEqual(["n1:a1", "error UNREACHABLE", "n1:a2", "error UNREACHABLE"]);
  });

  it("Settle: a failed part still fails the whole call (settles are idempotent; the SDK sends the whole call again)", async () => {
    const svc = forwardingService(WorkerService, workersImpl, { ownership: ownershipOf({ fencedHere: true }), peers: peersOf({ n2: "serves" }, []), handoffWaitMs: 1_000, others: () => [] });
    const settle = { settlements: [{ queue: "a1", taskId: "t1" }, { queue: "b1", taskId: "t2" }] };
    await expect(svc.settle(callOf(settle))).rejects.toMatchObject({ code: "UNAVAILABLE", reason: "FENCED" });
  });
});
