/**
 * Sessions against a real node: the SDK's Client and Worker carry their calls on session
 * streams (the node counts them: conveyor_session_calls_total, conveyor_sessions_open),
 * with the unary calls' answers, errors and security (a token revoked by a reload refuses
 * the session's next call); an idle session ends itself, so a script that forgets
 * `close()` still exits; `sessions: false` keeps every call unary; and a node stopping
 * with a worker's Lease parked on a session stops at once.
 */
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, Mux, Worker, json, newTask } from "../../src/index.js";
import { eventually, NodeProcess, REPO_ROOT } from "../support/node-process.js";
import { authFileWithRoles } from "../support/security.js";
import { outcome } from "../support/sdk.js";

function metric(text: string, name: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

describe("sessions on one node", () => {
  let node: NodeProcess;
  beforeAll(async () => {
    node = await NodeProcess.start();
  });
  afterAll(async () => {
    await node?.stop();
    node?.cleanup();
  });

  const sessionCalls = async () => metric(await node.metrics(), "conveyor_session_calls_total");

  it("a producer and a worker run 300 tasks with their calls on sessions", async () => {
    const client = new Client({ address: node.grpcAddress });
    const done = new Set<number>();
    const mux = new Mux().handle("s", async (task) => {
      done.add(task.json<{ i: number }>().i);
    });
    const worker = new Worker({ mux, address: node.grpcAddress, queues: ["sessions"], concurrency: 20, logger: null, handleSignals: false }).start();
    try {
      const before = await sessionCalls();
      for (let round = 0; round < 3; round++) {
        await Promise.all(Array.from({ length: 100 }, (_, k) => client.enqueue(newTask("s", json({ i: round * 100 + k })), { queue: "sessions" })));
      }
      await eventually("all 300 tasks ran", async () => (done.size === 300 ? true : undefined), 30_000);
      const text = await node.metrics();
      // The worker's, busy with its parked Lease (the client's may have ended, idle).
      expect(metric(text, "conveyor_sessions_open")).toBeGreaterThanOrEqual(1);
      // Enqueues, leases and settles: far more than the few unary calls made while the sessions opened.
      expect(metric(text, "conveyor_session_calls_total") - before).toBeGreaterThan(10);
      const info = await client.getTask((await client.enqueue(newTask("s", json({ i: 300 })), { queue: "sessions" })).id);
      expect(info.queue).toBe("sessions");
    } finally {
      await worker.stop();
      client.close();
    }
    await eventually("both sessions closed", async () => (metric(await node.metrics(), "conveyor_sessions_open") === 0 ? true : undefined));
  });

  it("a script that never closes its Client still exits: an idle session ends itself", async () => {
    const script = [
      `import { Client, newTask, json } from ${JSON.stringify(pathToFileURL(join(REPO_ROOT, "dist/src/index.js")).href)};`,
      `const client = new Client({ address: ${JSON.stringify(node.grpcAddress)} });`,
      "for (let i = 0; i < 20; i++) await client.enqueue(newTask('s', json({ i })), { queue: 'script' });",
      "console.log('enqueued');",
    ].join("\n");
    const before = await sessionCalls();
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const startedAt = Date.now();
    const hung = setTimeout(() => child.kill("SIGKILL"), 20_000); // a session that kept it alive
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    clearTimeout(hung);
    expect(out).toContain("enqueued");
    expect(code).toBe(0);
    expect(Date.now() - startedAt).toBeLessThan(15_000);
    expect(await sessionCalls()).toBeGreaterThan(before); // some of its calls went on its session
  });

  it("with sessions: false every call is unary", async () => {
    const client = new Client({ address: node.grpcAddress, sessions: false });
    try {
      const before = await sessionCalls();
      for (let i = 0; i < 20; i++) await client.enqueue(newTask("s", json({ i })), { queue: "unary-only" });
      expect(await sessionCalls()).toBe(before);
      expect(metric(await node.metrics(), "conveyor_sessions_open")).toBe(0);
    } finally {
      client.close();
    }
  });

  it("an invalid enqueue on a session fails as it does unary, and only that call", async () => {
    const onSession = new Client({ address: node.grpcAddress, coalesceEnqueues: false });
    const unary = new Client({ address: node.grpcAddress, coalesceEnqueues: false, sessions: false });
    try {
      await eventually("the client's calls go on its session", async () => {
        const before = await sessionCalls();
        await onSession.enqueue(newTask("s", json({})), { queue: "warm" });
        return (await sessionCalls()) > before ? true : undefined;
      });
      const bad = () => Promise.all([
        onSession.enqueue(newTask("s", json({})), { queue: "fine" }),
        onSession.enqueue(newTask("s", json({})), { queue: "not a queue!" }),
      ].map(outcome));
      const [fine, failed] = await bad();
      expect(fine).toMatchObject({ ok: { state: "pending" } });
      expect(failed).toEqual(await outcome(unary.enqueue(newTask("s", json({})), { queue: "not a queue!" })));
      expect(failed).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "task.queue" });
    } finally {
      onSession.close();
      unary.close();
    }
  });
});

describe("sessions with auth on", () => {
  let node: NodeProcess;
  let auth: ReturnType<typeof authFileWithRoles>;
  beforeAll(async () => {
    auth = authFileWithRoles({ scoped: ["mine-*"], metricsPublic: true });
    node = await NodeProcess.start({ settings: { auth_file: auth.file } });
  });
  afterAll(async () => {
    await node?.stop();
    node?.cleanup();
  });

  it("every call on a session is checked with the session's token: scope and role refuse as unary calls do, a wrong token gets no session", async () => {
    const scoped = new Client({ address: node.grpcAddress, token: auth.scopedTokens.producer, coalesceEnqueues: false });
    const scopedUnary = new Client({ address: node.grpcAddress, token: auth.scopedTokens.producer, coalesceEnqueues: false, sessions: false });
    const reader = new Client({ address: node.grpcAddress, token: auth.tokens.reader, coalesceEnqueues: false });
    const readerUnary = new Client({ address: node.grpcAddress, token: auth.tokens.reader, coalesceEnqueues: false, sessions: false });
    const wrong = new Client({ address: node.grpcAddress, token: "not-a-token", coalesceEnqueues: false });
    const wrongUnary = new Client({ address: node.grpcAddress, token: "not-a-token", coalesceEnqueues: false, sessions: false });
    const sessionCalls = async () => metric(await node.metrics(), "conveyor_session_calls_total");
    try {
      const onSession = async (call: () => Promise<unknown>) => {
        await eventually("a call on the session", async () => {
          const before = await sessionCalls();
          await outcome(call());
          return (await sessionCalls()) > before ? true : undefined;
        });
        const before = await sessionCalls();
        const result = await outcome(call());
        expect(await sessionCalls()).toBe(before + 1);
        return result;
      };
      const outOfScope = await onSession(() => scoped.enqueue(newTask("s", json({})), { queue: "theirs" }));
      expect(outOfScope).toEqual(await outcome(scopedUnary.enqueue(newTask("s", json({})), { queue: "theirs" })));
      expect(outOfScope).toMatchObject({ code: "PERMISSION_DENIED", reason: "QUEUE_NOT_IN_SCOPE" });
      expect(await outcome(scoped.enqueue(newTask("s", json({})), { queue: "mine-a" }))).toMatchObject({ ok: { state: "pending" } });

      const noRole = await onSession(() => reader.enqueue(newTask("s", json({})), { queue: "mine-a" }));
      expect(noRole).toEqual(await outcome(readerUnary.enqueue(newTask("s", json({})), { queue: "mine-a" })));
      expect(noRole).toMatchObject({ code: "PERMISSION_DENIED", reason: "ROLE_REQUIRED" });

      // A wrong token gets no session at all: the node refuses the stream on its headers,
      // before reading a frame (security/admission.ts); its calls go unary, refused alike.
      const carriedBefore = await sessionCalls();
      const unknown = await outcome(wrong.enqueue(newTask("s", json({})), { queue: "mine-a" }));
      expect(await outcome(wrong.enqueue(newTask("s", json({})), { queue: "mine-a" }))).toEqual(unknown);
      expect(unknown).toEqual(await outcome(wrongUnary.enqueue(newTask("s", json({})), { queue: "mine-a" })));
      expect(unknown).toMatchObject({ code: "UNAUTHENTICATED" });
      expect(await sessionCalls()).toBe(carriedBefore);

      // A token revoked by a reload of the auth file: the session opened with it refuses its next call.
      writeFileSync(auth.file, readFileSync(authFileWithRoles({ metricsPublic: true }).file));
      await eventually("the revoked token refused on the session", async () => {
        const before = await sessionCalls();
        const result = await outcome(scoped.enqueue(newTask("s", json({})), { queue: "mine-a" }));
        return (result as { code?: string }).code === "UNAUTHENTICATED" && (await sessionCalls()) === before + 1 ? true : undefined;
      });
    } finally {
      for (const c of [scoped, scopedUnary, reader, readerUnary, wrong, wrongUnary]) c.close();
    }
  });
});

it("a node stopping with a worker's Lease parked on its session stops at once, well within its grace", async () => {
  const node = await NodeProcess.start({ settings: { shutdown_grace: "20s" } });
  const worker = new Worker({ mux: new Mux().handle("s", async () => {}), address: node.grpcAddress, queues: ["idle"], concurrency: 2, logger: null, handleSignals: false }).start();
  try {
    await eventually("the worker's Lease parked on its session", async () => {
      const text = await node.metrics();
      return metric(text, "conveyor_sessions_open") === 1 && metric(text, "conveyor_lease_waiters") >= 1 && metric(text, "conveyor_session_calls_total") >= 1 ? true : undefined;
    }, 20_000);
    const startedAt = Date.now();
    expect(await node.stop()).toBe(0);
    expect(Date.now() - startedAt).toBeLessThan(10_000);
  } finally {
    await worker.stop();
    node.cleanup();
  }
});
