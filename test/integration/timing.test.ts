/**
 * Time-driven behaviour through a real node: retention purge, pre-dispatch expiry, the
 * effective deadline handed to handlers, and a worker that reconnects after its node
 * restarts.
 */
import { describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { NodeProcess, eventually } from "../support/node-process.js";
import { connect, deferred } from "../support/sdk.js";

describe("time-driven behaviour", () => {
  it("purges a completed task once its retention is over", async () => {
    const node = await NodeProcess.start({ settings: { janitor_interval: "100ms" } });
    const sdk = connect(node);
    try {
      const kept = await sdk.client.enqueue(newTask("r", json({})), { queue: "retention", retention: "1h" });
      const brief = await sdk.client.enqueue(newTask("r", json({})), { queue: "retention", retention: "200ms" });
      sdk.worker(new Mux().handle("r", async () => "done"), { queues: ["retention"] });
      await sdk.waitForState(brief.id, "completed");
      await eventually("the janitor to purge the task", async () => {
        const err = await sdk.client.getTask(brief.id).then(() => undefined, (e: unknown) => e);
        return err && (err as { code: string }).code === "NOT_FOUND" ? true : undefined;
      });
      expect((await sdk.client.getTask(kept.id)).state).toBe("completed");
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("archives a task not dispatched before it expires, and hands handlers the effective deadline", async () => {
    const node = await NodeProcess.start();
    const sdk = connect(node);
    try {
      const info = await sdk.client.enqueue(newTask("e", json({})), { queue: "expiry", expiresIn: "150ms" });
      await sdk.admin.pauseQueue({ queue: "expiry" });
      const archived = await sdk.waitForState(info.id, "archived");
      expect(archived.lastError).toContain("expired before dispatch");

      const seen = deferred<Date | undefined>();
      const deadline = new Date(Date.now() + 60_000);
      const before = Date.now();
      sdk.worker(new Mux().handle("d", async (_t, ctx) => seen.resolve(ctx.deadline)), { queues: ["deadline"] });
      await sdk.client.enqueue(newTask("d", json({})), { queue: "deadline", timeout: "5s", deadline });
      const effective = (await seen.promise)!.getTime();
      // The earlier of the task's deadline and dispatch time + timeout.
      expect(effective).toBeGreaterThanOrEqual(before + 5_000);
      expect(effective).toBeLessThan(deadline.getTime());
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("a worker reconnects after its node restarts and keeps processing", async () => {
    let node = await NodeProcess.start();
    const first = connect(node);
    const ran: unknown[] = [];
    let ranTwice!: () => void;
    const twice = new Promise<void>((r) => (ranTwice = r));
    const errors: string[] = [];
    // The worker outlives the node: it is started on the first connection's address.
    const worker = first.worker(new Mux().handle("j", async (t) => {
      ran.push(t.json());
      if (ran.length === 2) ranTwice();
    }), { queues: ["reconnect"], onError: (_e, where) => errors.push(where) });
    let sdk = first;
    try {
      await first.client.enqueue(newTask("j", json({ n: 1 })), { queue: "reconnect" });
      await eventually("the first task to run", async () => (ran.length === 1 ? true : undefined));
      await node.kill();
      node = await node.restart();
      sdk = connect(node);
      await sdk.client.enqueue(newTask("j", json({ n: 2 })), { queue: "reconnect" });
      await twice;
      expect(ran).toEqual([{ n: 1 }, { n: 2 }]);
      expect(errors).toContain("lease"); // it saw the outage and retried
    } finally {
      await worker.stop({ graceMs: 0 });
      await first.close();
      if (sdk !== first) await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });
});
