/**
 * The `conveyor` CLI end to end: the built bin/conveyor.js run as a child process
 * against a real conveyord. Needs `npm run build` first (`npm test` does it).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";

const CLI = join(REPO_ROOT, "bin/conveyor.js");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let node: NodeProcess;

/** Runs the CLI; never rejects on a non-zero exit. `--server` is added unless `server` is null. */
function conveyor(args: string[], options: { server?: string | null; env?: Record<string, string> } = {}): Promise<Run> {
  const server = options.server === undefined ? node.grpcAddress : options.server;
  const argv = [CLI, ...(server === null ? [] : ["--server", server]), ...args];
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (!options.env?.CONVEYOR_SERVER) delete env.CONVEYOR_SERVER;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, argv, { cwd: REPO_ROOT, env, timeout: 20_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

/** Runs the CLI, expects exit 0, and returns stdout. */
async function ok(args: string[]): Promise<string> {
  const run = await conveyor(args);
  expect(run, `conveyor ${args.join(" ")}`).toMatchObject({ code: 0, stderr: "" });
  return run.stdout;
}

async function okJson<T = Record<string, unknown>>(args: string[]): Promise<T> {
  return JSON.parse(await ok([...args, "--json"])) as T;
}

/** Enqueues through the CLI and returns the new task's id. */
async function enqueue(queue: string, ...extra: string[]): Promise<string> {
  const out = await ok(["enqueue", "--queue", queue, "--type", "cli:test", ...extra]);
  const match = /^enqueued (\S+) to (\S+) \((\w+)\)\n$/.exec(out);
  expect(match, out).not.toBeNull();
  expect(match![2]).toBe(queue);
  return match![1]!;
}

interface QueueJson {
  name: string;
  paused: boolean;
  /** uint64 counts: strings, as the JSON API gives them. */
  counts: Record<string, string>;
}

async function queueInfo(queue: string): Promise<QueueJson | undefined> {
  const { queues } = await okJson<{ queues: QueueJson[] }>(["queue", "ls"]);
  return queues.find((q) => q.name === queue);
}

beforeAll(async () => {
  if (!existsSync(join(REPO_ROOT, "dist/cli/conveyor.js"))) {
    throw new Error("dist/cli/conveyor.js is missing: run `npm run build` first");
  }
  node = await NodeProcess.start();
});

afterAll(async () => {
  if (!node) return;
  await node.stop();
  node.cleanup();
});

describe("conveyor CLI", () => {
  it("enqueues a task that `task get` shows pending, with its payload pretty-printed", async () => {
    const id = await enqueue("cli-get", "--payload", '{"to":"ada@example.com","n":[1,2]}', "--priority", "7",
      "--metadata", "tenant=acme", "--timeout", "1m");
    const out = await ok(["task", "get", id]);
    expect(out).toMatch(new RegExp(`^id:\\s+${id}$`, "m"));
    expect(out).toMatch(/^queue:\s+cli-get$/m);
    expect(out).toMatch(/^type:\s+cli:test$/m);
    expect(out).toMatch(/^state:\s+pending$/m);
    expect(out).toMatch(/^priority:\s+7$/m);
    // enqueue --timeout is the task's per-attempt timeout, not the RPC deadline.
    expect(out).toMatch(/^timeout:\s+1m$/m);
    expect(out).toMatch(/^metadata:\s+tenant=acme$/m);
    expect(out).toMatch(/^created:\s+\d{4}-\d\d-\d\dT[\d:.]+Z \((just now|\d+s ago)\)$/m);
    expect(out).toContain('    "to": "ada@example.com",');
    expect(out).toMatch(/^content type:\s+application\/json$/m);
  });

  it("lists tasks in a table and hints at the next page", async () => {
    const first = await enqueue("cli-ls");
    const second = await enqueue("cli-ls", "--process-in", "1h");
    const all = await ok(["task", "ls", "cli-ls"]);
    // CREATED is as wide as its widest cell ("just now" or "3s ago"), so the gap after it varies.
    expect(all).toMatch(/^ID {36}TYPE {6}STATE {6}PRIORITY  RETRIED  CREATED {2,3}LAST ERROR$/m);
    expect(all).toContain(first);
    expect(all).toContain(second);
    expect(all).not.toContain("more:");

    const scheduled = await ok(["task", "ls", "cli-ls", "--state", "scheduled"]);
    expect(scheduled).toContain(second);
    expect(scheduled).not.toContain(first);

    const page = await ok(["task", "ls", "cli-ls", "--limit", "1"]);
    const token = /^more: --page-token (\S+)$/m.exec(page)?.[1];
    expect(token).toBeDefined();
    const next = await ok(["task", "ls", "cli-ls", "--limit", "1", "--page-token", token!]);
    expect([page.includes(first), next.includes(first)]).toEqual([true, false]);
    expect(next).toContain(second);
  });

  it("shows per-state counts in `queue ls`", async () => {
    await enqueue("cli-counts");
    await enqueue("cli-counts");
    await enqueue("cli-counts", "--process-in", "1h");

    const table = await ok(["queue", "ls"]);
    expect(table).toMatch(/^QUEUE\s+PAUSED  SCHEDULED  PENDING  AGGREGATING  ACTIVE  RETRY  COMPLETED  ARCHIVED  CANCELLED$/m);
    const row = table.split("\n").find((line) => line.startsWith("cli-counts "));
    expect(row).toBeDefined();
    const cells = row!.split(/\s+/);
    expect(cells).toEqual(["cli-counts", "no", "1", "2", "0", "0", "0", "0", "0", "0"]);

    expect(await queueInfo("cli-counts")).toMatchObject({ paused: false, counts: { pending: "2", scheduled: "1", cancelled: "0" } });
  });

  it("shows the ring and this node's grains with `cluster status`", async () => {
    await enqueue("cli-cluster");
    const text = await ok(["cluster", "status"]);
    expect(text).toMatch(/node:\s+127\.0\.0\.1:\d+/);
    expect(text).toMatch(/ring version:\s+1/);
    expect(text).toContain("cli-cluster");
    expect(text).toContain("this node");
    const json = JSON.parse(await ok(["cluster", "status", "--json"])) as { members: Array<{ self: boolean }>; ringVersion: string };
    expect(json.members).toEqual([expect.objectContaining({ self: true })]);
    expect(json.ringVersion).toBe("1");
  });

  it("pauses and resumes a queue", async () => {
    await enqueue("cli-pause");
    expect(await ok(["queue", "pause", "cli-pause"])).toBe("queue cli-pause paused\n");
    expect(await queueInfo("cli-pause")).toMatchObject({ paused: true });
    expect(await ok(["queue", "resume", "cli-pause"])).toBe("queue cli-pause resumed\n");
    expect(await queueInfo("cli-pause")).toMatchObject({ paused: false });
  });

  it("prints --json in the JSON API's dialect (int64 as strings, enum names, base64 bytes), before or after the subcommand", async () => {
    const enqueued = await okJson<{ result: { id: string; queue: string; state: string; existed: boolean } }>(
      ["enqueue", "--queue", "cli-json", "--type", "cli:json", "--payload", '{"a":1}', "--timeout", "30s"]);
    expect(enqueued.result).toMatchObject({ queue: "cli-json", state: "TASK_STATE_PENDING", existed: false });

    const run = await conveyor(["--json", "task", "get", enqueued.result.id]);
    expect(run.code).toBe(0);
    const fromCli = JSON.parse(run.stdout) as { task: Record<string, unknown> };
    expect(fromCli.task).toMatchObject({
      id: enqueued.result.id,
      type: "cli:json",
      state: "TASK_STATE_PENDING",
      payload: Buffer.from('{"a":1}').toString("base64"),
      contentType: "application/json",
      timeoutMs: "30000",
    });
    expect(fromCli.task.createdAtMs).toMatch(/^\d+$/);
    expect(fromCli.task).not.toHaveProperty("$typeName");
    // The very same document the JSON API answers.
    const api = await fetch(`http://${node.httpAddress}/api/conveyor.v1.AdminService/GetTask`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ id: enqueued.result.id }),
    });
    expect(await api.json()).toEqual(fromCli);

    const list = await okJson<{ tasks: Array<{ id: string }>; nextPageToken: string }>(["task", "ls", "cli-json"]);
    expect(list.tasks.map((t) => t.id)).toEqual([enqueued.result.id]);
    expect(list.nextPageToken).toBe("");
  });

  it("cancels a task, which then shows as cancelled; cancelling it again is a conflict (exit 5)", async () => {
    const id = await enqueue("cli-cancel");
    expect(await ok(["task", "cancel", id])).toBe(`task ${id} cancelled\n`);
    const { task } = await okJson<{ task: { state: string; cancelReason: string } }>(["task", "get", id]);
    expect(task).toMatchObject({ state: "TASK_STATE_CANCELLED", cancelReason: "OPERATOR" });
    expect(await ok(["task", "get", id])).toMatch(/^state:\s+cancelled$/m);

    const again = await conveyor(["task", "cancel", id]);
    expect(again.code).toBe(5);
    expect(again.stderr).toMatch(/^error: .*already cancelled/);

    expect(await ok(["task", "retry", id])).toBe(`task ${id} is now pending\n`);
  });

  it("rejects a priority out of range before sending anything (exit 2)", async () => {
    const run = await conveyor(["enqueue", "--queue", "cli-bad-priority", "--type", "x", "--priority", "10"]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/^error: option '--priority.*'10' is invalid.*1\.\.9/);
    expect(await queueInfo("cli-bad-priority")).toBeUndefined();
  });

  it("rejects a payload that is not JSON before sending anything (exit 2)", async () => {
    const run = await conveyor(["enqueue", "--queue", "cli-bad-payload", "--type", "x", "--payload", "{not json"]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/--payload.*is invalid.*not valid JSON/);
    expect(await queueInfo("cli-bad-payload")).toBeUndefined();
  });

  it("rejects bad integers, durations, unknown commands and missing arguments with exit 2", async () => {
    const limit = await conveyor(["task", "ls", "cli-x", "--limit", "ten"]);
    expect(limit).toMatchObject({ code: 2, stdout: "" });
    expect(limit.stderr).toMatch(/--limit.*'ten' is invalid.*not an integer/);

    const duration = await conveyor(["enqueue", "--type", "x", "--process-in", "5 parsecs"]);
    expect(duration.code).toBe(2);
    expect(duration.stderr).toMatch(/--process-in.*is invalid.*invalid duration/);

    expect(await conveyor(["queue", "frobnicate"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^error: unknown command 'frobnicate'/) });
    expect(await conveyor(["task", "get"])).toMatchObject({ code: 2, stderr: "error: missing required argument 'id'\n" });
  });

  it("prints the server's message and exits 3 for an unknown task", async () => {
    const run = await conveyor(["task", "get", "no-such-task"]);
    expect(run.code).toBe(3);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe('error: task "no-such-task" not found\n');
  });

  it("prints the server's validation message (naming the field) and exits 2", async () => {
    const run = await conveyor(["enqueue", "--queue", "bad queue", "--type", "x"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^error: task\.queue: invalid queue name "bad queue"/);
  });

  it("with --json prints errors as one JSON object on stderr, with the same exit codes", async () => {
    const notFound = await conveyor(["task", "get", "no-such-task", "--json"]);
    expect(notFound).toMatchObject({ code: 3, stdout: "" });
    expect(JSON.parse(notFound.stderr)).toEqual({ code: "NOT_FOUND", reason: "TASK_NOT_FOUND", message: 'task "no-such-task" not found' });

    const invalid = await conveyor(["--json", "enqueue", "--queue", "bad queue", "--type", "x"]);
    expect(invalid.code).toBe(2);
    expect(JSON.parse(invalid.stderr)).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "task.queue" });

    const usage = await conveyor(["task", "ls", "q", "--limit", "ten", "--json"]);
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stderr)).toMatchObject({ code: "INVALID_ARGUMENT", reason: "USAGE", message: expect.stringMatching(/^option '--limit/) });

    const down = await conveyor(["queue", "ls", "--json"], { server: "127.0.0.1:1" });
    expect(down.code).toBe(4);
    expect(JSON.parse(down.stderr)).toEqual({
      code: "UNAVAILABLE", reason: "UNREACHABLE", message: "cannot reach conveyor at 127.0.0.1:1 (is conveyord running?)",
    });
  });

  it("takes the server from CONVEYOR_SERVER, and --server wins over it", async () => {
    await enqueue("cli-env");
    const viaEnv = await conveyor(["queue", "ls"], { server: null, env: { CONVEYOR_SERVER: node.grpcAddress } });
    expect(viaEnv).toMatchObject({ code: 0, stderr: "" });
    expect(viaEnv.stdout).toContain("cli-env");

    const flagWins = await conveyor(["queue", "ls", "--server", node.grpcAddress], { server: null, env: { CONVEYOR_SERVER: "127.0.0.1:1" } });
    expect(flagWins).toMatchObject({ code: 0, stderr: "" });
  });

  it("explains a server it cannot reach and exits 4", async () => {
    const run = await conveyor(["queue", "ls"], { server: "127.0.0.1:1" });
    expect(run.code).toBe(4);
    expect(run.stderr).toBe("error: cannot reach conveyor at 127.0.0.1:1 (is conveyord running?)\n");
  });

  it("cuts table cells with … to fit COLUMNS, and never cuts piped output without it", async () => {
    const id = await enqueue("cli-width-with-a-rather-long-queue-name");
    const piped = await ok(["task", "ls", "cli-width-with-a-rather-long-queue-name"]);
    expect(piped).toContain(id);
    expect(piped).not.toContain("…");

    const narrow = await conveyor(["task", "ls", "cli-width-with-a-rather-long-queue-name"], { env: { COLUMNS: "60" } });
    expect(narrow).toMatchObject({ code: 0, stderr: "" });
    const lines = narrow.stdout.trimEnd().split("\n");
    expect(lines.length).toBe(2);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(60);
    expect(lines[1]).toMatch(new RegExp(`^${id.slice(0, 3)}\\S*…`));
    expect(lines[0]).toMatch(/^ID\s+TYPE\s+STATE\s+PRIORITY\s+RETRIED\s+CREATED\s+LAST ERROR$/);
  });

  it("strategy set names a missing flag or a misnamed rule field, exits 2 and sets nothing", async () => {
    const missing = await conveyor(["strategy", "set", "cli-strategy", "--expression", "input.x"]);
    expect(missing).toMatchObject({ code: 2, stdout: "", stderr: "error: strategy set: missing --max-runs, --strategy (give all three, or --rules)\n" });

    const misnamed = await conveyor(["strategy", "set", "cli-strategy", "--rules", '[{"expresion":"input.x","maxRuns":1,"limitStrategy":"GROUP_ROUND_ROBIN"}]']);
    expect(misnamed).toMatchObject({ code: 2, stdout: "" });
    expect(misnamed.stderr).toMatch(/--rules.*rule 0: unknown field "expresion"; the fields are expression, maxRuns, limitStrategy, name/);

    const badStrategy = await conveyor(["strategy", "set", "cli-strategy", "--rules", '[{"expression":"input.x","maxRuns":1,"limitStrategy":"FIFO"}]']);
    expect(badStrategy.code).toBe(2);
    expect(badStrategy.stderr).toMatch(/rule 0: "limitStrategy": use one of GROUP_ROUND_ROBIN/);

    expect(await ok(["strategy", "ls"])).not.toContain("cli-strategy");
  });

  it("group set changes only the thresholds it is given", async () => {
    await ok(["group", "set", "cli-groups", "--max-size", "7", "--max-delay", "2m", "--grace", "5s"]);
    expect(await ok(["group", "set", "cli-groups", "--grace", "9s"])).toBe(
      "queue cli-groups, group (queue default): max size 7, max delay 2m, grace 9s (applies now)\n");
    // A group's first override starts from the queue's default.
    expect(await ok(["group", "set", "cli-groups", "--group", "g", "--max-size", "3"])).toBe(
      "queue cli-groups, group g: max size 3, max delay 2m, grace 9s (applies now)\n");
    const none = await conveyor(["group", "set", "cli-groups"]);
    expect(none).toMatchObject({ code: 2, stderr: "error: group set: give at least one of --max-size, --max-delay, --grace\n" });
  });
});
