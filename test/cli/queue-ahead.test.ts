/**
 * Settings made ahead of a queue's first task (issue 34, item 4), through the built CLI,
 * the SDK's Admin and the JSON API against a real conveyord. A pause on a never-used name
 * is accepted and holds for tasks enqueued later, across a restart; a resume of one leaves
 * no queue behind; a new name near an existing queue (or one a worker polls) is served
 * with a warning naming that queue. Needs `npm run build` first.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Admin, Mux, Worker, json, newTask } from "../../src/index.js";
import { NodeProcess, REPO_ROOT, eventually } from "../support/node-process.js";
import { jsonApi } from "../support/security.js";
import { connect } from "../support/sdk.js";

const CLI = join(REPO_ROOT, "bin/conveyor.js");

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

beforeAll(async () => {
  node = await NodeProcess.start();
  sdk = connect(node);
});

afterAll(async () => {
  await sdk?.close();
  await node?.stop();
  node?.cleanup();
});

function conveyor(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CONVEYOR_SERVER;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [CLI, "--server", node.grpcAddress, ...args], { cwd: REPO_ROOT, env, timeout: 20_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

async function queueRow(name: string): Promise<{ name: string; paused?: boolean } | undefined> {
  const run = await conveyor("queue", "ls", "--json");
  expect(run.code, run.stderr).toBe(0);
  return (JSON.parse(run.stdout) as { queues?: Array<{ name: string; paused?: boolean }> }).queues?.find((q) => q.name === name);
}

describe("settings made before a queue's first task", () => {
  it("queue pause on a never-used name holds for tasks enqueued later, across a restart; resume releases them", async () => {
    expect(await conveyor("queue", "pause", "emails")).toEqual({ code: 0, stdout: "queue emails paused\n", stderr: "" });
    const task = await sdk.client.enqueue(newTask("send", json({})), { queue: "emails" });
    expect(await sdk.leaseNow("emails")).toEqual([]);

    await sdk.close();
    await node.stop();
    node = await NodeProcess.start({ dataDir: node.dataDir });
    sdk = connect(node);
    expect(await queueRow("emails")).toMatchObject({ paused: true });
    expect(await sdk.leaseNow("emails")).toEqual([]);

    expect(await conveyor("queue", "resume", "emails")).toEqual({ code: 0, stdout: "queue emails resumed\n", stderr: "" });
    expect((await sdk.leaseNow("emails")).flatMap((d) => d.tasks.map((t) => t.id))).toEqual([task.id]);
  });

  it("queue resume on a never-used name answers and leaves no queue behind", async () => {
    expect(await conveyor("queue", "resume", "never-used")).toEqual({ code: 0, stdout: "queue never-used resumed\n", stderr: "" });
    expect(await queueRow("never-used")).toBeUndefined();
  });

  it("a setting on a new name near an existing queue is made, with a warning naming that queue", async () => {
    await sdk.client.enqueue(newTask("bill", json({})), { queue: "billing" });
    const cases = [
      ["queue", "pause", "biling"],
      ["concurrency", "set", "billinq", "--max", "2"],
      ["ratelimit", "set", "billingz", "--rate", "5"],
      ["group", "set", "bxlling", "--max-size", "3"],
    ];
    for (const args of cases) {
      const run = await conveyor(...args);
      expect({ args, code: run.code }).toEqual({ args, code: 0 });
      expect(run.stderr).toBe(`warning: queue "${args[2]}" had no tasks or settings before; did you mean "billing"?\n`);
    }
    // Made all the same: the typo'd names are now queues with those settings (an operator removes them with queue rm).
    expect(await queueRow("biling")).toMatchObject({ paused: true });
    // A name far from every queue gets no warning.
    expect((await conveyor("concurrency", "set", "ledger", "--max", "1")).stderr).toBe("");
  });

  it("a queue a worker polls exists: pausing it does not warn, and a name near it does", async () => {
    const worker = new Worker({ address: node.grpcAddress, queues: ["invoices"], handleSignals: false, logger: null, mux: new Mux().handle("never", async () => {}) });
    worker.start();
    try {
      await eventually("the worker polling invoices", async () => ((await sdk.admin.listWorkers({})).workers.some((w) => w.queues.includes("invoices")) ? true : undefined));
      expect(await conveyor("queue", "pause", "invoices")).toEqual({ code: 0, stdout: "queue invoices paused\n", stderr: "" });
      expect(await conveyor("queue", "resume", "invoices")).toEqual({ code: 0, stdout: "queue invoices resumed\n", stderr: "" });
      expect((await conveyor("queue", "pause", "invoice")).stderr).toContain('did you mean "invoices"?');
    } finally {
      await worker.stop();
    }
  });

  it("the SDK's Admin and the JSON API accept the same, with the hint", async () => {
    const admin = new Admin({ address: node.grpcAddress });
    try {
      expect(await admin.pauseQueue("sdk-ahead")).toMatchObject({ name: "sdk-ahead", paused: true });
      expect((await admin.pauseQueue("sdk-ahead")).similarQueue).toBeUndefined();
      expect(await admin.setConcurrencyLimit("sdk-aheat", 2)).toMatchObject({ queue: "sdk-aheat", max: 2, similarQueue: "sdk-ahead" });
      expect(await admin.setRateLimit("sdk-ahaed", { ratePerSec: 1 })).toMatchObject({ similarQueue: "sdk-ahead" });
      expect(await admin.setGroupConfig("sdk-aheaf", "", { maxSize: 2, maxDelay: "1m", grace: "5s" })).toMatchObject({ similarQueue: "sdk-ahead" });
    } finally {
      await admin.close();
    }
    const res = await jsonApi(node.httpAddress, "AdminService/PauseQueue", { queue: "json-ahead" });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ queue: { name: "json-ahead", paused: true } });
  });
});
