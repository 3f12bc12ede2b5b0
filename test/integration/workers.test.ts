/**
 * Worker visibility through a real node: two SDK workers with different queues and
 * types appear in ListWorkers (gRPC) and `conveyor worker ls`, an active task names the
 * worker holding it in GetTask and `conveyor task get`, and a stopped worker leaves.
 */
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { NodeProcess, eventually } from "../support/node-process.js";
import { connect, deferred, runCli } from "../support/sdk.js";

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

describe("ListWorkers", () => {
  it("shows two workers with their queues, types and held tasks; task get names the holder", async () => {
    const started = deferred();
    const release = deferred();
    const mail = sdk.worker(new Mux().handle("email:send", async () => {
      started.resolve();
      await release.promise;
    }), { queues: ["mail"], concurrency: 3, workerId: "mail-worker" });
    sdk.worker(new Mux().handle("img:resize", async () => {}).handle("img:crop", async () => {}),
      { queues: { images: 2, thumbs: 1 }, concurrency: 5, workerId: "image-worker" });
    await mail.registered;

    const beforeMs = Date.now();
    const { id } = await sdk.client.enqueue(newTask("email:send", json({ to: "ada" })), { queue: "mail" });
    await started.promise;

    // Both workers have called by now (the image worker parks its Lease call at once).
    const { workers } = await eventually("both workers listed", async () => {
      const res = await sdk.admin.listWorkers({});
      return res.workers.length === 2 && res.workers.every((w) => w.host !== "") ? res : undefined;
    });
    expect(workers.map((w) => ({
      workerId: w.workerId, host: w.host, queues: w.queues, types: w.types, concurrency: w.concurrency, inFlight: w.inFlight,
    }))).toEqual([
      { workerId: "image-worker", host: hostname(), queues: ["images", "thumbs"], types: ["img:crop", "img:resize"], concurrency: 5, inFlight: 0 },
      { workerId: "mail-worker", host: hostname(), queues: ["mail"], types: ["email:send"], concurrency: 3, inFlight: 1 },
    ]);
    for (const w of workers) {
      expect(Number(w.connectedSinceMs)).toBeGreaterThan(beforeMs - 60_000);
      expect(Number(w.lastSeenAtMs)).toBeGreaterThanOrEqual(Number(w.connectedSinceMs));
    }

    const { task } = await sdk.admin.getTask({ id });
    expect(task?.leaseWorkerId).toBe("mail-worker");
    expect(Number(task!.leasedAtMs)).toBeGreaterThanOrEqual(beforeMs);
    expect(Number(task!.leasedAtMs)).toBeLessThanOrEqual(Date.now());

    // The cells of each table row, whether the table is boxed or plain (columns apart by 2+ spaces).
    const ls = (await runCli(node, "worker", "ls")).stdout.split("\n")
      .map((line) => line.split(/│|\s{2,}/).map((c) => c.trim()).filter((c) => c !== ""))
      .filter((cells) => cells.length > 1);
    expect(ls[0]).toEqual(["WORKER", "HOST", "QUEUES", "TYPES", "IN FLIGHT", "CONCURRENCY", "STATE", "LAST SEEN", "CONNECTED"]);
    expect(ls[1]!.slice(0, 7)).toEqual(["image-worker", hostname(), "images,thumbs", "img:crop,img:resize", "0", "5", "polling"]);
    expect(ls[2]!.slice(0, 6)).toEqual(["mail-worker", hostname(), "mail", "email:send", "1", "3"]);
    expect(ls).toHaveLength(3);
    const lsJson = JSON.parse((await runCli(node, "worker", "ls", "--json")).stdout) as { workers: Array<{ workerId: string }> };
    expect(lsJson.workers.map((w) => w.workerId)).toEqual(["image-worker", "mail-worker"]);

    const get = (await runCli(node, "task", "get", id)).stdout;
    expect(get).toMatch(/^held by:?\s+mail-worker$/m);
    expect(get).toMatch(/^held since:?\s+\d{4}-\d\d-\d\dT[\d:.]+Z \(/m);

    release.resolve();
    await sdk.waitForState(id, "completed");
    const after = await sdk.admin.getTask({ id });
    expect(after.task?.leaseWorkerId).toBe("");
    const mailAfter = (await sdk.admin.listWorkers({})).workers.find((w) => w.workerId === "mail-worker");
    expect(mailAfter?.inFlight).toBe(0);

    // A graceful stop drains the worker: it leaves the list at once.
    await mail.stop();
    expect((await sdk.admin.listWorkers({})).workers.map((w) => w.workerId)).toEqual(["image-worker"]);
  });
});
