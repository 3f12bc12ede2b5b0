/**
 * A worker leases only the task types it has handlers for (issue 11, item 6): a task of
 * another type stays pending with no retry spent until a worker that handles it comes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

beforeAll(async () => {
  node = await NodeProcess.start();
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

describe("workers lease only their declared types", () => {
  it("a worker for `a` leaves `b` pending and untouched; a worker for `b` then runs it", async () => {
    const queue = "types-q";
    const enqueue = (type: string) => sdk.client.enqueue(newTask(type, json({})), { queue, maxRetry: 3 });
    // b first: a worker that took any type would lease it before a.
    const b1 = await enqueue("ty:b");
    const a1 = await enqueue("ty:a");
    sdk.worker(new Mux().handle("ty:a", () => "a done"), { queues: [queue], concurrency: 1, handleSignals: false });
    await sdk.waitForState(a1.id, "completed");
    // The a-worker is parked in a Lease call now: a new b must not wake it, a new a must.
    const b2 = await enqueue("ty:b");
    const a2 = await enqueue("ty:a");
    await sdk.waitForState(a2.id, "completed");
    for (const id of [b1.id, b2.id]) {
      const b = await sdk.client.getTask(id);
      expect(b.state).toBe("pending");
      expect(b.retried).toBe(0);
      expect(b.lastError).toBe("");
    }
    sdk.worker(new Mux().handle("ty:b", () => "b done"), { queues: [queue], handleSignals: false });
    for (const id of [b1.id, b2.id]) {
      const done = await sdk.waitForState(id, "completed");
      expect(done.retried).toBe(0);
      expect(new TextDecoder().decode(done.result)).toBe("b done");
    }
  });

  it("a Lease call naming too many types is refused, naming the field", async () => {
    const types = Array.from({ length: 1001 }, (_, i) => `t${i}`);
    const error = await sdk.workerRpc.lease({ workerId: "w", queues: [{ queue: "types-q", weight: 1 }], maxDeliveries: 1, waitMs: 0, types })
      .then(() => undefined, (e: unknown) => e as { field?: string; message: string });
    expect(error?.field).toBe("types");
  });
});
