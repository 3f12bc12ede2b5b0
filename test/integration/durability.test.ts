/**
 * Crashes and restarts: a worker killed with -9, a node killed with -9 right after
 * acknowledged writes, and grain passivation. Each test owns its node.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { NodeProcess, REPO_ROOT, eventually } from "../support/node-process.js";
import { connect, deferred } from "../support/sdk.js";

describe("durability", () => {
  it("a worker killed with -9 loses its lease; another worker gets the task", async () => {
    const node = await NodeProcess.start({ settings: { lease_ttl: "600ms" } });
    const sdk = connect(node);
    try {
      const queue = "crash-worker";
      const info = await sdk.client.enqueue(newTask("hang", json({})), { queue });
      const crashing = spawn(process.execPath, [join(REPO_ROOT, "test/support/crash-worker.mjs"), node.grpcAddress, queue], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      const started = await new Promise<string>((resolve) => {
        createInterface({ input: crashing.stdout! }).on("line", (line) => {
          if (line.startsWith("started ")) resolve(line.slice(8));
        });
      });
      expect(started).toBe(info.id);
      crashing.kill("SIGKILL");

      const rerun = deferred<number>();
      sdk.worker(new Mux().handle("hang", async (task) => rerun.resolve(task.retried)), { queues: [queue] });
      expect(await rerun.promise).toBe(1); // the lost lease counted as one failed attempt
      const done = await sdk.waitForState(info.id, "completed");
      expect(done.lastError).toContain("lease expired");
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("a node killed with -9 right after acknowledged writes keeps every one of them", async () => {
    let node = await NodeProcess.start();
    let sdk = connect(node);
    const queue = "crash-node";
    try {
      const enqueued = await Promise.all(
        Array.from({ length: 300 }, (_, i) => sdk.client.enqueue(newTask("job", json({ i })), { queue, priority: 1 + (i % 9) })),
      );
      const scheduled = await sdk.client.enqueue(newTask("job", json({ later: true })), { queue, processIn: "1h" });
      // Lease 100 and settle 60 of them with raw RPCs, so each settle is acknowledged.
      const leased = await sdk.workerRpc.lease({ workerId: "t", queues: [{ queue, weight: 1 }], maxDeliveries: 100, waitMs: 0 });
      expect(leased.deliveries).toHaveLength(100);
      const settled = leased.deliveries.slice(0, 60);
      const res = await sdk.workerRpc.settle({
        workerId: "t",
        settlements: settled.map((d, i) => ({
          queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id,
          outcome: i % 3 === 0 ? Outcome.SUCCESS : i % 3 === 1 ? Outcome.SKIP_RETRY : Outcome.RELEASED,
        })),
      });
      expect(res.results.every((r) => !r.error)).toBe(true);
      await node.kill();

      await sdk.close();
      node = await node.restart();
      sdk = connect(node);
      const counts = await sdk.counts(queue);
      expect(counts).toMatchObject({ completed: 20, archived: 20, active: 40, scheduled: 1, pending: 300 - 100 + 20 });
      for (const [i, d] of settled.entries()) {
        const t = await sdk.client.getTask(d.tasks[0]!.id);
        expect(t.state).toBe(i % 3 === 0 ? "completed" : i % 3 === 1 ? "archived" : "pending");
      }
      expect((await sdk.client.getTask(scheduled.id)).state).toBe("scheduled");
      expect(new Set(enqueued.map((e) => e.id)).size).toBe(300);
      // The 40 leases that were in flight at the crash are still held and can be settled.
      const stillHeld = leased.deliveries.slice(60);
      const hb = await sdk.workerRpc.heartbeat({ workerId: "t", leases: stillHeld.map((d) => ({ queue, leaseId: d.leaseId })) });
      expect(hb.leases.every((l) => l.held)).toBe(true);
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("SIGTERM stops the node cleanly and a restart serves the same tasks", async () => {
    let node = await NodeProcess.start();
    let sdk = connect(node);
    try {
      const info = await sdk.client.enqueue(newTask("job", json({ n: 1 })), { queue: "term" });
      await sdk.close();
      expect(await node.stop()).toBe(0);
      node = await node.restart();
      sdk = connect(node);
      const ran = deferred<unknown>();
      sdk.worker(new Mux().handle("job", async (t) => ran.resolve(t.json())), { queues: ["term"] });
      expect(await ran.promise).toEqual({ n: 1 });
      await sdk.waitForState(info.id, "completed");
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("passivation and reactivation change nothing observable", async () => {
    const node = await NodeProcess.start({ settings: { grain_idle_timeout: "150ms" } });
    const sdk = connect(node);
    const queue = "passivate";
    try {
      for (const [name, priority] of [["b", 4], ["a", 9], ["c", 4], ["d", 1]] as const) {
        await sdk.client.enqueue(newTask("p", json({ name })), { queue, priority });
      }
      const later = await sdk.client.enqueue(newTask("p", json({ name: "later" })), { queue, priority: 1, processIn: "5s" });
      const unique = await sdk.client.enqueue(newTask("p", json({ name: "u" })), { queue, priority: 1, uniqueKey: "only-one" });
      const before = await sdk.counts(queue);
      await eventually("the idle grain to passivate", async () => {
        const m = await node.metrics();
        return /conveyor_grain_lifecycle_total\{queue="passivate",event="idle"\} [1-9]/.test(m) ? true : undefined;
      });
      expect(await sdk.counts(queue)).toEqual(before);
      // The unique key is still held after reactivation.
      const dup = await sdk.client.enqueue(newTask("p", json({})), { queue, uniqueKey: "only-one" }).catch((e: unknown) => e);
      expect(dup).toMatchObject({ code: "ALREADY_EXISTS" });
      const order: string[] = [];
      const allSix = deferred();
      sdk.worker(new Mux().handle("p", async (t) => {
        order.push(t.json<{ name: string }>().name);
        if (order.length === 6) allSix.resolve();
      }), { queues: [queue], concurrency: 1 });
      await allSix.promise;
      expect(order.slice(0, 5)).toEqual(["a", "b", "c", "d", "u"]);
      expect(order[5]).toBe("later"); // promoted on time by the reactivated grain's timer
      await sdk.waitForState(later.id, "completed");
      await sdk.waitForState(unique.id, "completed");
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });
});
