/**
 * The CLI's queue removal, bulk actions and attempt history (issue 11 items 9-11): the
 * built bin/conveyor.js run as a child process against a real conveyord. Needs
 * `npm run build` first.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

const CLI = join(REPO_ROOT, "bin/conveyor.js");

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

/** Runs the CLI; never rejects on a non-zero exit. */
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

async function ok(...args: string[]): Promise<string> {
  const run = await conveyor(...args);
  expect(run, `conveyor ${args.join(" ")}`).toMatchObject({ code: 0, stderr: "" });
  return run.stdout;
}

describe("conveyor queue", () => {
  // Pause and resume accept a queue before its first task (test/cli/queue-ahead.test.ts).
  it("task ls and rm of a queue that does not exist fail, naming it, and leave no queue behind", async () => {
    for (const args of [["task", "ls", "nosuchqueue"], ["queue", "rm", "nosuchqueue"]]) {
      const run = await conveyor(...args);
      expect(run.code, args.join(" ")).not.toBe(0);
      expect(run.stdout).toBe("");
      expect(run.stderr).toContain('queue "nosuchqueue" not found');
    }
    expect(await ok("queue", "ls")).not.toContain("nosuchqueue");
  });

  it("rm removes a queue with only finished tasks, and refuses one with unfinished tasks, naming how many", async () => {
    const done = await sdk.client.enqueue(newTask("t", json({})), { queue: "cli-rm" });
    await sdk.admin.cancelTask({ id: done.id });
    await sdk.client.enqueue(newTask("t", json({})), { queue: "cli-rm-busy" });

    const refused = await conveyor("queue", "rm", "cli-rm-busy");
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('queue "cli-rm-busy" holds 1 unfinished task;');

    expect(await ok("queue", "rm", "cli-rm")).toBe("queue cli-rm removed (1 finished task deleted)\n");
    const ls = await ok("queue", "ls");
    expect(ls).not.toContain("cli-rm ");
    expect(ls).toContain("cli-rm-busy");
  });
});

describe("conveyor task get: attempts", () => {
  it("prints each attempt with its worker, outcome and error (a task that failed twice, then succeeded)", async () => {
    let calls = 0;
    const mux = new Mux().handle("flaky", async () => {
      calls += 1;
      if (calls < 3) throw new Error(`boom ${calls}`);
    });
    const info = await sdk.client.enqueue(newTask("flaky", json({})), { queue: "cli-attempts", backoff: { base: 10, max: 20 } });
    sdk.worker(mux, { queues: ["cli-attempts"], workerId: "cli-worker" });
    await sdk.waitForState(info.id, "completed");

    const out = await ok("task", "get", info.id);
    const table = out.slice(out.indexOf("ATTEMPT"));
    const rows = table.split("\n").filter((l) => /^\W*\d+\s/.test(l.replace(/[│|]/g, " ").trim()));
    expect(rows).toHaveLength(3);
    expect(rows[0]).toMatch(/\b1\b.*cli-worker.*failed.*boom 1/);
    expect(rows[1]).toMatch(/\b2\b.*cli-worker.*failed.*boom 2/);
    expect(rows[2]).toMatch(/\b3\b.*cli-worker.*succeeded/);

    const asJson = JSON.parse(await ok("task", "get", info.id, "--json")) as { attempts: Array<{ number: number; outcome: string; error?: string }> };
    expect(asJson.attempts.map((a) => [a.number, a.outcome, a.error ?? ""])).toEqual([[1, "failed", "boom 1"], [2, "failed", "boom 2"], [3, "succeeded", ""]]);
  });
});

describe("conveyor task retry-all|archive-all|delete-all|cancel-all", () => {
  it("acts on every task of a queue in a state and prints how many changed", async () => {
    const queue = "cli-bulk";
    for (let i = 0; i < 3; i++) await sdk.client.enqueue(newTask("t", json({ i })), { queue, processIn: "1h" });
    await sdk.client.enqueue(newTask("t", json({})), { queue });
    expect(await ok("task", "cancel-all", queue, "--state", "scheduled")).toBe(`3 scheduled tasks cancelled in queue ${queue}\n`);
    expect(await ok("task", "retry-all", queue, "--state", "cancelled")).toBe(`3 cancelled tasks retried in queue ${queue}\n`);
    expect(await ok("task", "archive-all", queue, "--state", "pending")).toBe(`4 pending tasks archived in queue ${queue}\n`);
    expect(JSON.parse(await ok("task", "delete-all", queue, "--state", "archived", "--json"))).toEqual({ affected: "4" }); // int64 as a string, as the JSON API writes it
    expect(await ok("task", "ls", queue)).toBe(`no tasks in queue ${queue}\n`);
  });

  it("refuses a state the action does not apply to, naming the state, and a missing --state", async () => {
    await sdk.client.enqueue(newTask("t", json({})), { queue: "cli-bulk-refused" });
    const wrong = await conveyor("task", "retry-all", "cli-bulk-refused", "--state", "pending");
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toContain("state: retry applies to tasks that are archived, cancelled; not pending");
    const missing = await conveyor("task", "cancel-all", "cli-bulk-refused");
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain("--state");
    expect((await sdk.counts("cli-bulk-refused")).pending).toBe(1);
  });
});
