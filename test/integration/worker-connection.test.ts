/**
 * A Worker and a Client against a node that is missing or goes away (issue 11, items 4
 * and 5): the worker says it is waiting, stops at once on SIGTERM even then, drains
 * gracefully on SIGTERM when connected, and both resume within about a second of the
 * node's return however long it was gone. The worker is a real child process
 * (test/support/signal-worker.mjs) with the Worker's default signal handling.
 */
import { createServer, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Client, json, newTask } from "../../src/index.js";
import { RECONNECT_BACKOFF_MAX_MS } from "../../src/base/limits.js";
import { NodeProcess } from "../support/node-process.js";
import { rejection } from "../support/sdk.js";
import { WorkerProcess, freePort } from "../support/worker-process.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function track(worker: WorkerProcess): WorkerProcess {
  cleanups.push(() => worker.kill());
  return worker;
}

describe("a worker whose node is unreachable", () => {
  it("logs that it is waiting for the node at its address, and exits promptly on SIGTERM", async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const worker = track(WorkerProcess.start(address, "conn-none"));
    const waiting = await worker.waitFor(`waiting for the node at ${address}`);
    expect(JSON.parse(waiting.text).level).toBe("warn");
    const signalledAt = Date.now();
    worker.child.kill("SIGTERM");
    const exit = await worker.exited;
    expect(exit.code).toBe(0);
    expect(exit.atMs - signalledAt).toBeLessThan(2_000);
  });

  it("keeps retrying, and runs tasks once a node appears at that address", async () => {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const worker = track(WorkerProcess.start(address, "conn-later"));
    await worker.waitFor(`waiting for the node at ${address}`);
    const node = await NodeProcess.start({ grpcPort: port });
    const client = new Client({ address });
    cleanups.push(async () => {
      client.close();
      await node.stop();
      node.cleanup();
    });
    const info = await client.enqueue(newTask("quick", json({})), { queue: "conn-later" });
    await worker.waitFor(`ran ${info.id}`);
    await worker.waitFor(`connected to the node at ${address}`);
  });

  it("SIGINT too", async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const worker = track(WorkerProcess.start(address, "conn-none"));
    await worker.waitFor(`waiting for the node at ${address}`);
    const signalledAt = Date.now();
    worker.child.kill("SIGINT");
    const exit = await worker.exited;
    expect(exit.code).toBe(0);
    expect(exit.atMs - signalledAt).toBeLessThan(2_000);
  });
});

describe("graceful stop on SIGTERM", () => {
  it("lets the running task finish and settles it before exiting", async () => {
    const node = await NodeProcess.start();
    const client = new Client({ address: node.grpcAddress });
    cleanups.push(async () => {
      client.close();
      await node.stop();
      node.cleanup();
    });
    const worker = track(WorkerProcess.start(node.grpcAddress, "conn-grace"));
    const info = await client.enqueue(newTask("slow", json({ ms: 700 })), { queue: "conn-grace" });
    await worker.waitFor(`started ${info.id}`);
    worker.child.kill("SIGTERM");
    const exit = await worker.exited;
    expect(exit.code).toBe(0);
    expect(worker.lines.some((l) => l.text === `finished ${info.id}`)).toBe(true);
    // Settled before the process exited: the node already has it completed, with its result.
    const task = await client.getTask(info.id);
    expect(task.state).toBe("completed");
    expect(new TextDecoder().decode(task.result)).toBe("done");
    expect(task.retried).toBe(0);
  });
});

describe("reconnection after an outage", () => {
  it("the worker and a producer resume within ~1 s of the node's return, after a long outage", async () => {
    const first = await NodeProcess.start();
    const port = first.grpcPort;
    let node = first;
    cleanups.push(async () => {
      await node.stop();
      node.cleanup();
    });
    const worker = track(WorkerProcess.start(node.grpcAddress, "conn-outage"));
    const client = new Client({ address: node.grpcAddress, connectTimeoutMs: 60_000 });
    cleanups.push(() => client.close());
    const before = await client.enqueue(newTask("quick", json({})), { queue: "conn-outage" });
    await worker.waitFor(`ran ${before.id}`);

    await node.kill();
    await worker.waitFor("lost the node at");
    // Stand in for the node while it is down: count the connection attempts the worker
    // and the producer make, refusing each. With gRPC's default backoff (1 s growing by
    // 1.6x to 120 s) twenty-four attempts (two channels) take about 15 s; capped, about 5 s: an outage longer than
    // the old backoff tolerated (1.5 s to resume after 3 s).
    const attempts: number[] = [];
    const sockets = new Set<Socket>();
    const standIn = createServer((socket) => {
      attempts.push(Date.now());
      sockets.add(socket);
      socket.destroy();
    });
    await new Promise<void>((resolve) => standIn.listen(port, "127.0.0.1", resolve));
    const outageStartedAt = Date.now();
    // The producer enqueues during the outage: the call waits for the node.
    const during = client.enqueue(newTask("quick", json({})), { queue: "conn-outage" });
    while (attempts.length < 24) await new Promise((resolve) => standIn.once("connection", resolve));
    await new Promise((resolve) => standIn.close(resolve));
    const outageMs = Date.now() - outageStartedAt;
    // The gaps between attempts stayed under the cap.
    const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
    expect(Math.max(...gaps)).toBeLessThan(RECONNECT_BACKOFF_MAX_MS * 1.2 + 300);

    node = await first.restart();
    const backAt = Date.now();
    const info = await during;
    const producerResumeMs = Date.now() - backAt;
    const ran = await worker.waitFor(`ran ${info.id}`);
    const workerResumeMs = ran.atMs - backAt;
    console.log(`outage ${outageMs} ms (${attempts.length} refused connection attempts); producer resumed in ${producerResumeMs} ms, worker ran the next task ${workerResumeMs} ms after the node was back`);
    expect(producerResumeMs).toBeLessThan(1_500);
    expect(workerResumeMs).toBeLessThan(1_500);
    await worker.waitFor("reconnected to the node at");
  });
});

describe("a producer whose node is unreachable", () => {
  it("fails after connectTimeoutMs with UNREACHABLE 'node unreachable at ADDR'", async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const client = new Client({ address, connectTimeoutMs: 700 });
    cleanups.push(() => client.close());
    const startedAt = Date.now();
    const error = await rejection(client.enqueue(newTask("quick", json({})), { queue: "conn-none" }));
    const waitedMs = Date.now() - startedAt;
    expect(error.reason).toBe("UNREACHABLE");
    expect(error.code).toBe("UNAVAILABLE");
    expect(error.message).toContain(`node unreachable at ${address}`);
    expect(waitedMs).toBeGreaterThanOrEqual(650);
    expect(waitedMs).toBeLessThan(3_000);
  });

  it("refuses a connectTimeoutMs that is not a positive number", () => {
    expect(() => new Client({ connectTimeoutMs: 0 })).toThrow(/connectTimeoutMs must be a positive number/);
  });
});
