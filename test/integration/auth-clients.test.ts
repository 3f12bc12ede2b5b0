/**
 * The SDK and the CLI against a node with tokens: the token options work, and a missing,
 * unknown or under-privileged token fails with words that say what is wrong.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, ConveyorError, Mux, Worker, json, newTask } from "../../src/index.js";
import { newToken } from "../../src/server/security/tokens.js";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";
import { authFileWithRoles, type RoleName } from "../support/security.js";

const execFileAsync = promisify(execFile);

describe("SDK and CLI with tokens", () => {
  let node: NodeProcess;
  let tokens: Record<RoleName, string>;

  beforeAll(async () => {
    const auth = authFileWithRoles();
    tokens = auth.tokens;
    node = await NodeProcess.start({ settings: { auth_file: auth.file } });
  });

  afterAll(async () => {
    await node?.stop();
    node?.cleanup();
  });

  /** The real CLI; env replaces CONVEYOR_TOKEN (and nothing else). */
  async function cli(args: string[], token?: string): Promise<{ code: number; stdout: string; stderr: string }> {
    const env = { ...process.env };
    delete env.CONVEYOR_TOKEN;
    if (token !== undefined) env.CONVEYOR_TOKEN = token;
    try {
      const out = await execFileAsync(process.execPath, [join(REPO_ROOT, "bin/conveyor.js"), "--server", node.grpcAddress, ...args], { env });
      return { code: 0, ...out };
    } catch (e) {
      const err = e as { code: number; stdout: string; stderr: string };
      return { code: err.code, stdout: err.stdout, stderr: err.stderr };
    }
  }

  it("a producer's Client enqueues and a worker's Worker runs the task", async () => {
    const client = new Client({ address: node.grpcAddress, token: tokens.producer });
    let resolveDone!: (v: unknown) => void;
    const done = new Promise((r) => (resolveDone = r));
    const worker = new Worker({
      address: node.grpcAddress, token: tokens.worker, queues: ["sdkq"], leaseWaitMs: 1_000,
      mux: new Mux().handle("hello", async (task) => {
        resolveDone(task.json());
        return "ok";
      }),
    }).start();
    try {
      const info = await client.enqueue(newTask("hello", json({ n: 1 })), { queue: "sdkq" });
      expect(info.state).toBe("pending");
      expect(await done).toEqual({ n: 1 });
    } finally {
      await worker.stop({ graceMs: 0 });
      client.close();
    }
  });

  it("the SDK reports a missing token, an unknown token and a missing role in words", async () => {
    const saved = process.env.CONVEYOR_TOKEN;
    delete process.env.CONVEYOR_TOKEN;
    const none = new Client({ address: node.grpcAddress, timeoutMs: 5_000 });
    const unknown = new Client({ address: node.grpcAddress, token: newToken().token, timeoutMs: 5_000 });
    const reader = new Client({ address: node.grpcAddress, token: tokens.reader, timeoutMs: 5_000 });
    try {
      const spec = newTask("hello", json({}));
      await expect(none.enqueue(spec, { queue: "sdkq" })).rejects.toMatchObject({ code: "UNAUTHENTICATED", message: expect.stringContaining("the node requires a token") });
      await expect(unknown.enqueue(spec, { queue: "sdkq" })).rejects.toMatchObject({ code: "UNAUTHENTICATED", message: "the token is not one this node knows" });
      const denied = await reader.enqueue(spec, { queue: "sdkq" }).catch((e: unknown) => e);
      expect(denied).toBeInstanceOf(ConveyorError);
      expect(denied).toMatchObject({ code: "PERMISSION_DENIED", message: expect.stringMatching(/^reader-token \(roles: reader\) may not call TaskService\/Enqueue(Batch)?; it needs one of: admin, producer$/) });
      expect(() => new Client({ address: node.grpcAddress, token: " " })).toThrow(/token: empty/);
    } finally {
      if (saved !== undefined) process.env.CONVEYOR_TOKEN = saved;
      none.close();
      unknown.close();
      reader.close();
    }
  });

  it("the CLI takes --token or CONVEYOR_TOKEN and says what is wrong without one", async () => {
    const missing = await cli(["queue", "ls"]);
    expect(missing.code).toBe(6);
    expect(missing.stderr).toContain("the node requires a token");
    expect(missing.stderr).toContain("--token or CONVEYOR_TOKEN");
    expect((await cli(["--token", tokens.reader, "queue", "ls"])).code).toBe(0);
    expect((await cli(["queue", "ls"], tokens.reader)).code).toBe(0);
    const denied = await cli(["queue", "pause", "sdkq"], tokens.reader);
    expect(denied.code).toBe(6);
    expect(denied.stderr).toMatch(/reader-token .* may not call AdminService\/PauseQueue; it needs one of: admin/);
    expect((await cli(["queue", "pause", "sdkq", "--token", tokens.admin])).code).toBe(0);
  });
});
