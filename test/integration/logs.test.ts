/**
 * conveyord's logs and start-up checks, on real processes: JSON lines when not on a
 * terminal, human lines with --log-format pretty, one line per operator action and per
 * failed task attempt (never the payload), a warning for an unknown CONVEYOR_* variable,
 * and one clear line for a port in use or a heartbeat too slow for the lease.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { json, Mux, newTask } from "../../src/index.js";
import { eventually, NodeProcess, REPO_ROOT } from "../support/node-process.js";
import { connect, runCli } from "../support/sdk.js";

const DAEMON = join(REPO_ROOT, "bin/conveyord.js");

type Entry = Record<string, unknown> & { msg: string; level: number };

let node: NodeProcess;

const entries = (n: NodeProcess): Entry[] => n.logs.map((line) => JSON.parse(line) as Entry);
const entry = (what: string, match: (e: Entry) => boolean) =>
  eventually(what, async () => entries(node).find(match));

beforeAll(async () => {
  node = await NodeProcess.start({ settings: { retry_backoff_base: "10ms", retry_backoff_max: "10ms" }, env: { CONVEYOR_LEASE_TLL: "5s" } });
});

afterAll(async () => {
  await node?.stop();
  node?.cleanup();
});

/** Runs conveyord with `args` until it prints a line matching `until` (then kills it) or exits. */
function runDaemon(args: string[], until?: RegExp): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), "conveyor-logs-"));
  const child = spawn(process.execPath, [DAEMON, "--data-dir", dataDir, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout! }).on("line", (line) => {
    stdout += `${line}\n`;
    if (until?.test(line)) child.kill("SIGTERM");
  });
  return new Promise((resolve) => child.once("close", (code) => {
    rmSync(dataDir, { recursive: true, force: true });
    resolve({ code, stdout, stderr });
  }));
}

describe("conveyord logs", () => {
  it("writes JSON lines when stdout is not a terminal", () => {
    expect(node.logs.length).toBeGreaterThan(0);
    for (const line of node.logs) expect(() => JSON.parse(line), line).not.toThrow();
    expect(entries(node).find((e) => e.msg === "conveyord listening")).toMatchObject({ level: 30, grpc: node.grpcAddress });
  });

  it("writes human lines with --log-format pretty", async () => {
    const run = await runDaemon(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-format", "pretty"], /conveyord listening/);
    const listening = run.stdout.split("\n").find((l) => l.includes("conveyord listening"));
    expect(listening).toMatch(/^\[\d{4}-\d\d-\d\dT[\d:.]+Z\] INFO: conveyord listening \{.*"grpc":"127\.0\.0\.1:\d+","http":"127\.0\.0\.1:\d+"/);
    expect(run.stdout).not.toMatch(/^\{/m);
  });

  it("refuses an unknown --log-format, naming the choices", async () => {
    const run = await runDaemon(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-format", "fancy"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe('conveyord: flags: log_format: expected one of auto, pretty, json, got "fancy"\n');
  });

  it("warns of an unknown CONVEYOR_* variable, naming the closest known one", () => {
    expect(entries(node).find((e) => e.variable === "CONVEYOR_LEASE_TLL")).toMatchObject({
      level: 40, closest: "CONVEYOR_LEASE_TTL",
      msg: "unknown environment variable CONVEYOR_LEASE_TLL is ignored; did you mean CONVEYOR_LEASE_TTL?",
    });
    // The clients' own variable is known: no warning for it.
    expect(entries(node).some((e) => e.variable === "CONVEYOR_SERVER")).toBe(false);
  });

  it("logs each failed attempt with queue, type, id, attempt and error, never the payload", async () => {
    const sdk = connect(node);
    try {
      const secret = "payload-secret-7f3a9c";
      const { id } = await sdk.client.enqueue(newTask("logs:fail", json({ secret })), { queue: "logs-failing", maxRetry: 1 });
      sdk.worker(new Mux().handle("logs:fail", async () => {
        throw new Error("smtp said no");
      }), { queues: ["logs-failing"] });
      const archived = await entry("the archived failure", (e) => e.id === id && e.next === "archived");
      const retried = entries(node).find((e) => e.id === id && e.next === "retry");
      expect(retried).toMatchObject({ level: 40, msg: "task attempt failed", queue: "logs-failing", type: "logs:fail", attempt: 1, maxRetry: 1 });
      expect(retried!.error).toContain("smtp said no");
      expect(archived).toMatchObject({ level: 50, msg: "task failed and was archived", queue: "logs-failing", type: "logs:fail", attempt: 2 });
      expect(node.logs.join("\n")).not.toContain(secret);
    } finally {
      await sdk.close();
    }
  });

  it("logs each operator action once, from the CLI (gRPC) and from the JSON API alike", async () => {
    // A setting first: pausing a queue that does not exist yet is NOT_FOUND.
    await runCli(node, "concurrency", "set", "logs-ops", "--max", "3");
    await runCli(node, "queue", "pause", "logs-ops");
    const api = await fetch(`http://${node.httpAddress}/api/conveyor.v1.AdminService/ResumeQueue`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ queue: "logs-ops" }),
    });
    expect(api.status).toBe(200);
    await runCli(node, "task", "cancel", "logs-no-such-task").catch(() => undefined);
    await entry("the refused cancel", (e) => e.action === "CancelTask");
    const ops = entries(node).filter((e) => e.queue === "logs-ops" || e.target === "logs-no-such-task");
    expect(ops.map((e) => [e.action, e.queue ?? null, e.target ?? null, e.refused ?? null])).toEqual([
      ["SetQueueConcurrencyLimit", "logs-ops", null, null],
      ["PauseQueue", "logs-ops", null, null],
      ["ResumeQueue", "logs-ops", null, null],
      ["CancelTask", null, "logs-no-such-task", "NOT_FOUND"],
    ]);
    expect(ops[0]).toMatchObject({ max: 3, msg: "operator action SetQueueConcurrencyLimit" });
    // Reads are not actions.
    await runCli(node, "queue", "ls");
    expect(entries(node).some((e) => e.action === "ListQueues")).toBe(false);
  });
});

describe("conveyord start-up checks", () => {
  it("says in one line that the gRPC port is in use, and exits 1", async () => {
    const run = await runDaemon(["--listen", node.grpcAddress, "--http", "127.0.0.1:0"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`conveyord: port ${node.grpcPort} on 127.0.0.1 is in use (listen); stop the other process or choose another port with --listen HOST:PORT\n`);
  });

  it("says in one line that the HTTP port is in use, and exits 1", async () => {
    const run = await runDaemon(["--listen", "127.0.0.1:0", "--http", node.httpAddress]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`conveyord: port ${node.httpPort} on 127.0.0.1 is in use (http); stop the other process or choose another port with --http HOST:PORT\n`);
  });

  it("refuses a heartbeat_interval above lease_ttl / 3", async () => {
    const run = await runDaemon(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--set", "lease_ttl=3s", "--set", "heartbeat_interval=1500ms"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe("conveyord: heartbeat_interval (1.5s) must be at most lease_ttl / 3 (1s with lease_ttl 3s)\n");
  });
});
