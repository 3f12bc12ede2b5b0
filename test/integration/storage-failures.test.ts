/**
 * Storage failures through a real node: a write the data file refuses fails only the
 * request it belongs to (a SQLite trigger forces the failure for one task type), and a
 * full disk is RESOURCE_EXHAUSTED naming the data directory while reads keep working
 * and writes resume on their own once space is freed.
 */
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { ConveyorError, bytes, json, newTask } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

/** A node whose data file refuses every task of type "poison" (a trigger installed while it was stopped). */
async function nodeWithPoisonTrigger(): Promise<NodeProcess> {
  const first = await NodeProcess.start();
  await first.stop();
  const db = new BetterSqlite3(join(first.dataDir, "conveyor.db"));
  db.exec(`CREATE TRIGGER poison BEFORE INSERT ON tasks WHEN NEW.type = 'poison'
    BEGIN SELECT RAISE(ABORT, 'forced failure'); END`);
  db.close();
  return first.restart();
}

async function rejection(promise: Promise<unknown>): Promise<ConveyorError> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ConveyorError);
  return error as ConveyorError;
}

describe("a write the data file refuses", () => {
  it("fails only its own request: its neighbours in the same turn are stored and the queue keeps working", async () => {
    const node = await nodeWithPoisonTrigger();
    const sdk = connect(node);
    try {
      // One client, one turn: the SDK coalesces these 21 calls into one EnqueueBatch, and
      // the poison task shares its queue's grain turn with 10 of them.
      const calls = [
        ...Array.from({ length: 10 }, (_, i) => sdk.client.enqueue(newTask("job", json({ i })), { queue: "poisoned" })),
        sdk.client.enqueue(newTask("poison", json({})), { queue: "poisoned" }),
        ...Array.from({ length: 10 }, (_, i) => sdk.client.enqueue(newTask("job", json({ i })), { queue: "neighbour" })),
      ];
      const settled = await Promise.allSettled(calls);
      const failed = settled.filter((s) => s.status === "rejected");
      expect(failed).toHaveLength(1);
      expect(settled[10]!.status).toBe("rejected");
      const error = (failed[0] as PromiseRejectedResult).reason as ConveyorError;
      expect(error).toBeInstanceOf(ConveyorError);
      expect(error).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
      expect(error.message).toContain("forced failure");

      for (const s of settled.filter((x) => x.status === "fulfilled")) {
        const { id } = (s as PromiseFulfilledResult<{ id: string }>).value;
        expect((await sdk.client.getTask(id)).state).toBe("pending");
      }
      expect(await sdk.counts("poisoned")).toMatchObject({ pending: 10 });
      expect(await sdk.counts("neighbour")).toMatchObject({ pending: 10 });

      // The queue keeps working: more tasks go in, and all of them can be leased.
      await sdk.client.enqueue(newTask("job", json({ after: true })), { queue: "poisoned" });
      expect(await sdk.leaseNow("poisoned")).toHaveLength(11);
      expect(await sdk.leaseNow("neighbour")).toHaveLength(10);
      // Nothing was rolled back for everyone.
      expect(node.logs.some((l) => l.includes("storage transaction rolled back"))).toBe(false);
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("fails a single enqueue and a whole EnqueueTx, storing nothing of either", async () => {
    const node = await nodeWithPoisonTrigger();
    const sdk = connect(node);
    try {
      const single = await rejection(sdk.client.enqueue(newTask("poison", json({})), { queue: "q" }));
      expect(single).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
      const tx = await rejection(sdk.taskRpc.enqueueTx({ tasks: [
        { type: "job", queue: "q", payload: new Uint8Array(), contentType: "application/json" },
        { type: "poison", queue: "q", payload: new Uint8Array(), contentType: "application/json" },
      ] }));
      expect(tx).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
      expect(await sdk.counts("q")).toMatchObject({ pending: 0 });
      const ok = await sdk.client.enqueue(newTask("job", bytes(new Uint8Array([1]))), { queue: "q" });
      expect((await sdk.client.getTask(ok.id)).state).toBe("pending");
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });
});
