/**
 * The dashboard's HTTP surface on a real conveyord: the generic JSON adapter over
 * AdminService/TaskService (status mapping, bad input, limits), the static files, and a
 * prompt stop while a client polls over keep-alive. Errors a real node cannot be made to
 * produce (INTERNAL, 429, 503) are checked against the adapter in-process.
 */
import { createServer, request, Agent, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { jsonApiRoute, jsonService } from "../../src/server/json-api.js";
import type { UnaryImpl } from "../../src/rpc/service-definition.js";
import { json, newTask } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

const ADMIN = "conveyor.v1.AdminService";
const TASKS = "conveyor.v1.TaskService";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

interface Answer {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

async function post(base: string, path: string, body: string | object = {}, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

const api = (path: string, body?: string | object, headers?: Record<string, string>) => post(`http://${node.httpAddress}`, `/api/${path}`, body, headers);

beforeAll(async () => {
  node = await NodeProcess.start();
  sdk = connect(node);
});

afterAll(async () => {
  await sdk?.close();
  await node?.stop();
  node?.cleanup();
});

describe("JSON API on the node's HTTP port", () => {
  it("serves AdminService and TaskService in the protobuf JSON mapping", async () => {
    const enqueued = await api(`${TASKS}/Enqueue`, {
      task: { type: "json:test", queue: "jsonapi", payload: Buffer.from('{"hello":"world"}').toString("base64"), contentType: "application/json", metadata: { a: "b" } },
    });
    expect(enqueued.status).toBe(200);
    expect(enqueued.headers.get("content-type")).toContain("application/json");
    const id = (enqueued.body.result as { id: string; state: string }).id;
    expect(enqueued.body.result).toMatchObject({ queue: "jsonapi", state: "TASK_STATE_PENDING" });

    // The same task through gRPC: one implementation behind both transports.
    expect((await sdk.client.getTask(id)).json()).toEqual({ hello: "world" });

    const queues = await api(`${ADMIN}/ListQueues`, {});
    const queue = (queues.body.queues as Array<{ name: string; counts: Record<string, string> }>).find((q) => q.name === "jsonapi");
    expect(queue?.counts).toMatchObject({ pending: "1", completed: "0" }); // uint64 as strings, defaults emitted

    const got = await api(`${ADMIN}/GetTask`, { id });
    const task = got.body.task as { payload: string; metadata: Record<string, string>; createdAtMs: string };
    expect(Buffer.from(task.payload, "base64").toString()).toBe('{"hello":"world"}');
    expect(task.metadata).toEqual({ a: "b" });
    expect(Number(task.createdAtMs)).toBeGreaterThan(0);

    const page = await api(`${ADMIN}/ListTasks`, { queue: "jsonapi", state: "TASK_STATE_PENDING", pageSize: 10 });
    expect((page.body.tasks as Array<{ id: string }>).map((t) => t.id)).toEqual([id]);
  });

  it("maps ConveyorError codes to HTTP statuses with the server's message and field", async () => {
    const invalid = await api(`${ADMIN}/SetQueueConcurrencyLimit`, { queue: "jsonapi", max: 0 });
    expect(invalid).toMatchObject({ status: 400, body: { code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", message: "max: must be at least 1, got 0", field: "max" } });

    const badQueue = await api(`${ADMIN}/PauseQueue`, { queue: "no spaces" });
    expect(badQueue.status).toBe(400);
    expect(badQueue.body.message).toContain('invalid queue name "no spaces"');

    const missing = await api(`${ADMIN}/GetTask`, { id: "nope" });
    expect(missing).toMatchObject({ status: 404, body: { code: "NOT_FOUND", reason: "TASK_NOT_FOUND", message: 'task "nope" not found' } });
    expect(missing.body).not.toHaveProperty("field");

    const { id } = await sdk.client.enqueue(newTask("t", json({})), { queue: "jsonapi", uniqueKey: "only-once" });
    const conflict = await api(`${TASKS}/Enqueue`, { task: { type: "t", queue: "jsonapi", uniqueKey: "only-once" } });
    expect(conflict).toMatchObject({ status: 409, body: { code: "ALREADY_EXISTS", reason: "UNIQUE_KEY_CONFLICT" } });

    const wrongState = await api(`${ADMIN}/RetryTask`, { id });
    expect(wrongState).toMatchObject({ status: 409, body: { code: "FAILED_PRECONDITION", reason: "TASK_STATE_CONFLICT" } });
    expect(wrongState.body.message).toContain("only archived or cancelled tasks can be retried");
  });

  it("refuses malformed requests in words", async () => {
    const badJson = await api(`${ADMIN}/ListQueues`, "{not json");
    expect(badJson).toMatchObject({ status: 400, body: { code: "INVALID_ARGUMENT", reason: "BAD_JSON" } });
    expect(badJson.body.message).toMatch(/^request body is not valid JSON: /);

    const unknownField = await api(`${ADMIN}/ListQueues`, { queues: 1 });
    expect(unknownField).toMatchObject({ status: 400, body: { reason: "BAD_REQUEST" } });
    expect(unknownField.body.message).toContain('key "queues" is unknown');

    const wrongType = await api(`${ADMIN}/SetQueueConcurrencyLimit`, { queue: "q", max: "many" });
    expect(wrongType).toMatchObject({ status: 400, body: { reason: "BAD_REQUEST" } });

    expect(await api(`${ADMIN}/NoSuchMethod`)).toMatchObject({ status: 404, body: { code: "NOT_FOUND", reason: "UNKNOWN_METHOD" } });
    // Workers use gRPC only: WorkerService is not on the HTTP port.
    expect(await api("conveyor.v1.WorkerService/Lease")).toMatchObject({ status: 404, body: { reason: "UNKNOWN_SERVICE" } });

    const get = await fetch(`http://${node.httpAddress}/api/${ADMIN}/ListQueues`);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");

    const form = await api(`${ADMIN}/ListQueues`, "{}", { "content-type": "text/plain" });
    expect(form).toMatchObject({ status: 415, body: { reason: "UNSUPPORTED_MEDIA_TYPE" } });

    const crossSite = await api(`${ADMIN}/PauseQueue`, { queue: "jsonapi" }, { origin: "http://evil.example" });
    expect(crossSite).toMatchObject({ status: 403, body: { reason: "CROSS_ORIGIN" } });
    expect((await sdk.counts("jsonapi")).paused).toBe(false);
    const sameSite = await api(`${ADMIN}/ListQueues`, {}, { origin: `http://${node.httpAddress}` });
    expect(sameSite.status).toBe(200);
  });

  it("limits the request body to 2 MiB", async () => {
    const huge = JSON.stringify({ task: { type: "big", payload: Buffer.alloc(3 * 1024 * 1024).toString("base64") } });
    const res = await api(`${TASKS}/Enqueue`, huge);
    expect(res).toMatchObject({ status: 413, body: { reason: "BODY_TOO_LARGE" } });
    // The node is fine afterwards.
    expect((await api(`${ADMIN}/ListQueues`)).status).toBe(200);
  });

  it("serves the dashboard's files with a strict content security policy, and nothing outside web/", async () => {
    const base = `http://${node.httpAddress}`;
    const index = await fetch(`${base}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(index.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(await index.text()).toContain('<script type="module" src="/js/main.js">');

    const script = await fetch(`${base}/js/main.js`);
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    const etag = script.headers.get("etag")!;
    expect((await fetch(`${base}/js/main.js`, { headers: { "if-none-match": etag } })).status).toBe(304);

    expect((await fetch(`${base}/css/app.css`)).headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect((await fetch(`${base}/no-such-file.js`)).status).toBe(404);
    for (const sneaky of ["/%2e%2e/package.json", "/..%2fpackage.json", "/js/%2e%2e/%2e%2e/package.json"]) {
      expect((await rawGet(node.httpPort, sneaky)).status, sneaky).toBe(404);
    }
    // The metrics and health endpoints are untouched.
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${base}/metrics`)).text()).toContain("conveyor_");
  });

  it("a node stops promptly while a client polls its HTTP port over keep-alive", async () => {
    // Node's server.close() closes idle connections only: a connection busy at that
    // moment and reused before its keep-alive timeout (a dashboard polls every 2 s) used
    // to keep the node from ever exiting. Here a request is always in flight.
    const other = await NodeProcess.start();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let polling = true;
    let polls = 0;
    const poller = (async () => {
      while (polling) {
        try {
          await slowPost(other.httpPort, `/api/${ADMIN}/ListQueues`, agent, 50);
          polls++;
        } catch {
          return; // the node went away
        }
      }
    })();
    try {
      const started = Date.now();
      while (polls < 3 && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 10));
      expect(polls).toBeGreaterThanOrEqual(3);
      let bound: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        other.stop().then((code) => `exited with ${code}`),
        new Promise<string>((resolve) => (bound = setTimeout(() => resolve("still running after 5 s"), 5_000))),
      ]);
      clearTimeout(bound);
      expect(outcome).toBe("exited with 0");
    } finally {
      polling = false;
      await other.kill();
      await poller;
      agent.destroy();
      other.cleanup();
    }
  });
});

/** GET without URL normalisation (fetch would resolve "..") */
function rawGet(port: number, path: string): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method: "GET" }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0 }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** A POST whose body arrives in two parts `gapMs` apart, so the request is in flight that long. */
function slowPost(port: number, path: string, agent: Agent, gapMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.write("{");
    setTimeout(() => req.end("}"), gapMs);
  });
}

describe("JSON adapter (in-process)", () => {
  let server: Server;
  let base = "";
  const internal: Array<{ method: string; error: unknown }> = [];
  const calls: unknown[] = [];

  beforeAll(async () => {
    // Every AdminService method answers; a few fail on purpose.
    const impl = new Proxy({}, {
      get: (_target, name: string) => async (call: { request: unknown }) => {
        calls.push(call);
        if (name === "pauseQueue") throw new Error("disk on fire");
        if (name === "resumeQueue") throw new ConveyorError("RESOURCE_EXHAUSTED", "WAITERS_FULL", "too many waiters");
        if (name === "listTasks") throw new ConveyorError("UNAVAILABLE", "WRONG_OWNER", "queue is owned elsewhere");
        return {};
      },
    }) as UnaryImpl<typeof AdminService>;
    const route = jsonApiRoute([jsonService(AdminService, impl)], { onInternal: (method, error) => internal.push({ method, error }), maxBodyBytes: 1024 });
    server = createServer((req, res) => {
      void Promise.resolve(route(req, res)).then((handled) => {
        if (!handled) res.writeHead(404).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("hides unexpected errors behind INTERNAL and reports them through the callback", async () => {
    const res = await post(base, `/api/${ADMIN}/PauseQueue`, { queue: "q" });
    expect(res).toEqual(expect.objectContaining({ status: 500, body: { code: "INTERNAL", reason: "INTERNAL", message: "internal error; see the server log" } }));
    expect(internal).toHaveLength(1);
    expect(internal[0]).toMatchObject({ method: "PauseQueue" });
    expect(String(internal[0]!.error)).toContain("disk on fire");
  });

  it("maps RESOURCE_EXHAUSTED to 429 and UNAVAILABLE to 503", async () => {
    expect(await post(base, `/api/${ADMIN}/ResumeQueue`, { queue: "q" })).toMatchObject({ status: 429, body: { code: "RESOURCE_EXHAUSTED", message: "too many waiters" } });
    expect(await post(base, `/api/${ADMIN}/ListTasks`, { queue: "q" })).toMatchObject({ status: 503, body: { code: "UNAVAILABLE" } });
  });

  it("serves every method of the descriptor (new RPCs appear with no change) with a grpc-like call", async () => {
    for (const method of AdminService.methods) {
      if (["PauseQueue", "ResumeQueue", "ListTasks"].includes(method.name)) continue;
      expect((await post(base, `/api/${ADMIN}/${method.name}`, {})).status, method.name).toBe(200);
    }
    expect(calls.at(-1)).toMatchObject({ cancelled: false, request: expect.objectContaining({ $typeName: expect.stringMatching(/^conveyor\.v1\./) }) });
    expect(typeof (calls.at(-1) as { on: unknown }).on).toBe("function");
  });

  it("honours the configured body limit and leaves other paths to the next route", async () => {
    expect(await post(base, `/api/${ADMIN}/ListQueues`, JSON.stringify({ pad: "x".repeat(2048) }))).toMatchObject({ status: 413 });
    // Far beyond the limit the upload is not read at all: the connection is dropped.
    await expect(post(base, `/api/${ADMIN}/ListQueues`, JSON.stringify({ pad: "x".repeat(10_000) }))).rejects.toThrow();
    expect((await post(base, `/api/${ADMIN}/ListQueues`, {})).status).toBe(200);
    expect((await fetch(`${base}/metrics`)).status).toBe(404);
  });
});
