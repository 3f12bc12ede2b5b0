/**
 * Authentication and authorisation against a real node with an auth file: every RPC ×
 * every role (and no token, an unknown token) over gRPC and the JSON API, with the code
 * each gets and, for every refusal, proof that nothing changed; refusals logged (never
 * with the token) and counted; admin actions audited; /metrics behind reader, /healthz open.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, toJson, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { ConveyorError } from "../../src/base/errors.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { LimitStrategy } from "../../src/gen/conveyor/v1/task_pb.js";
import { TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { WorkerService } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { newToken } from "../../src/server/security/tokens.js";
import { NodeProcess } from "../support/node-process.js";
import { authFileWithRoles, jsonApi, matrixRequest, rawHttp, ROLE_NAMES, taskSpecIn, type RoleName } from "../support/security.js";

const SERVICES: DescService[] = [TaskService, WorkerService, AdminService];
const JSON_SERVICES = new Set(["TaskService", "AdminService"]); // WorkerService is gRPC only

/**
 * Who may call what, written from the RPC names and the issue, independently of the
 * table in src/server/security/roles.ts (a wrong row there fails here).
 */
function expectedRoles(service: string, method: string): RoleName[] {
  if (service === "WorkerService") return ["admin", "worker"];
  if (service === "TaskService") return ["GetTask", "WaitTask"].includes(method) ? ["admin", "producer", "reader"] : ["admin", "producer"];
  return /^(List|Get)/.test(method) ? ["admin", "reader"] : ["admin"];
}

const QUEUE = "authq";
/** A queue DeleteQueue removes when allowed (it has a setting, so a refused removal would show). */
const REMOVABLE_QUEUE = "authq-removable";
const taskSpec = taskSpecIn(QUEUE);

type Caller = { label: string; token?: string; roles: RoleName[] };

describe("auth matrix", () => {
  let node: NodeProcess;
  let tokens: Record<RoleName, string>;
  let admin: RpcChannel;
  let taskId: string;
  const callers: Caller[] = [];

  /** Everything an RPC could change, read with the admin token. */
  async function snapshot(): Promise<string> {
    const a = admin.service(AdminService);
    const parts = await Promise.all([
      a.listQueues({}), a.listTasks({ queue: QUEUE, pageSize: 1000 }), a.listConcurrencyLimits({}), a.listRateLimits({}),
      a.listGroupConfigs({}), a.listStrategies({}),
    ]);
    return JSON.stringify(parts, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
  }

  const requestFor = (rpc: string) => matrixRequest(rpc, { queue: QUEUE, removableQueue: REMOVABLE_QUEUE, taskId });

  beforeAll(async () => {
    const auth = authFileWithRoles();
    tokens = auth.tokens;
    node = await NodeProcess.start({ settings: { auth_file: auth.file } });
    admin = new RpcChannel({ address: node.grpcAddress, token: tokens.admin });
    // State every mutating request would change.
    const enq = await admin.service(TaskService).enqueue({ task: taskSpec });
    taskId = enq.result!.id;
    await admin.service(AdminService).setQueueConcurrencyLimit({ queue: QUEUE, max: 3 });
    await admin.service(AdminService).setQueueRateLimit({ queue: QUEUE, ratePerSec: 100 });
    await admin.service(AdminService).setQueueRateLimit({ queue: REMOVABLE_QUEUE, ratePerSec: 5 });
    await admin.service(AdminService).setGroupConfig({ config: { queue: QUEUE, group: "g", maxSize: 5, maxDelayMs: 1000n, graceMs: 1000n } });
    await admin.service(AdminService).setStrategies({ type: "t", rules: [{ expression: "input.k", maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] });
    callers.push({ label: "no token", roles: [] }, { label: "unknown token", token: newToken().token, roles: [] });
    for (const role of ROLE_NAMES) callers.push({ label: role, token: tokens[role], roles: [role] });
  });

  afterAll(async () => {
    admin?.close();
    for (const c of channels.values()) c.close();
    await node?.stop();
    node?.cleanup();
  });

  const rpcs = () => SERVICES.flatMap((s) => (s.methods as DescMethod[]).map((m) => ({ service: s, method: m, rpc: `${s.name}/${m.name}` })));

  const channels = new Map<string, RpcChannel>();
  async function grpcCode(service: DescService, method: DescMethod, token: string | undefined, request: unknown): Promise<string> {
    let channel = channels.get(token ?? "");
    if (!channel) channels.set(token ?? "", (channel = new RpcChannel({ address: node.grpcAddress, ...(token ? { token } : {}) })));
    try {
      const client = channel.service(service as typeof AdminService) as unknown as Record<string, (r: unknown, o: unknown) => Promise<unknown>>;
      await client[method.localName]!(request, { timeoutMs: 5_000 });
      return "OK";
    } catch (e) {
      if (!(e instanceof ConveyorError)) throw e;
      return e.code;
    }
  }

  it("refuses over gRPC with UNAUTHENTICATED or PERMISSION_DENIED, changing nothing", async () => {
    let refusals = 0;
    for (const { service, method, rpc } of rpcs()) {
      for (const caller of callers) {
        const allowed = expectedRoles(service.name, method.name).some((r) => caller.roles.includes(r));
        if (allowed) continue;
        const before = await snapshot();
        const code = await grpcCode(service, method, caller.token, requestFor(rpc));
        expect(code, `${caller.label} → ${rpc}`).toBe(caller.roles.length === 0 ? "UNAUTHENTICATED" : "PERMISSION_DENIED");
        expect(await snapshot(), `${caller.label} → ${rpc} changed state`).toBe(before);
        refusals++;
      }
    }
    expect(refusals).toBeGreaterThan(100);
  });

  it("refuses over the JSON API with 401 or 403, changing nothing", async () => {
    for (const { service, method, rpc } of rpcs().filter((r) => JSON_SERVICES.has(r.service.name))) {
      const body = toJson(method.input, create(method.input, requestFor(rpc) as never));
      for (const caller of callers) {
        const allowed = expectedRoles(service.name, method.name).some((r) => caller.roles.includes(r));
        if (allowed) continue;
        const before = await snapshot();
        const res = await jsonApi(node.httpAddress, rpc, body, caller.token);
        expect(res.status, `${caller.label} → ${rpc}: ${res.body}`).toBe(caller.roles.length === 0 ? 401 : 403);
        expect(JSON.parse(res.body).code).toBe(caller.roles.length === 0 ? "UNAUTHENTICATED" : "PERMISSION_DENIED");
        expect(await snapshot(), `${caller.label} → ${rpc} changed state`).toBe(before);
      }
    }
  });

  it("lets every allowed role through, on both transports", async () => {
    for (const { service, method, rpc } of rpcs()) {
      for (const caller of callers) {
        if (!expectedRoles(service.name, method.name).some((r) => caller.roles.includes(r))) continue;
        const request = requestFor(rpc);
        const code = await grpcCode(service, method, caller.token, request);
        expect(["UNAUTHENTICATED", "PERMISSION_DENIED"], `${caller.label} → ${rpc} over gRPC`).not.toContain(code);
        if (!JSON_SERVICES.has(service.name)) continue;
        const res = await jsonApi(node.httpAddress, rpc, toJson(method.input, create(method.input, request as never)), caller.token);
        expect([401, 403], `${caller.label} → ${rpc} over JSON: ${res.body}`).not.toContain(res.status);
      }
    }
    // The requests act when allowed (so the refusals above proved something).
    expect((await admin.service(AdminService).listStrategies({})).types.map((t) => t.type)).toEqual(expect.arrayContaining(["t2", "t3"]));
    expect((await admin.service(AdminService).listGroupConfigs({ queue: QUEUE })).configs.map((g) => g.group)).toContain("g2");
    expect((await admin.service(AdminService).listRateLimits({})).limits.find((l) => l.queue === QUEUE)).toBeUndefined(); // deleted by DeleteQueueRateLimit
    expect((await admin.service(AdminService).listQueues({})).queues.map((q) => q.name)).not.toContain(REMOVABLE_QUEUE); // DeleteQueue
  });

  it("says what is wrong: a missing token, an unknown token, a missing role", async () => {
    const reader = new RpcChannel({ address: node.grpcAddress, token: tokens.reader });
    const none = new RpcChannel({ address: node.grpcAddress });
    try {
      await expect(none.service(AdminService).listQueues({})).rejects.toMatchObject({ code: "UNAUTHENTICATED", reason: "CREDENTIALS_REQUIRED", message: expect.stringContaining("the node requires a token") });
      await expect(reader.service(AdminService).pauseQueue({ queue: QUEUE })).rejects.toMatchObject({
        code: "PERMISSION_DENIED", reason: "ROLE_REQUIRED", message: expect.stringMatching(/reader-token .* may not call AdminService\/PauseQueue; it needs one of: admin/),
      });
    } finally {
      reader.close();
      none.close();
    }
  });

  it("logs and counts refusals without the token, and audits admin actions with the identity", async () => {
    const bad = newToken().token;
    await jsonApi(node.httpAddress, "AdminService/ListQueues", {}, bad);
    const metrics = await rawHttp(node.httpAddress, "/metrics", { headers: { authorization: `Bearer ${tokens.reader}` } });
    expect(metrics.status).toBe(200);
    const count = (transport: string, reason: string) =>
      Number(new RegExp(`conveyor_auth_failures_total\\{transport="${transport}",reason="${reason}"\\} (\\d+)`).exec(metrics.body)?.[1] ?? 0);
    expect(count("grpc", "CREDENTIALS_REQUIRED")).toBeGreaterThan(0);
    expect(count("grpc", "ROLE_REQUIRED")).toBeGreaterThan(0);
    expect(count("http", "CREDENTIALS_UNKNOWN")).toBeGreaterThan(0);
    const logs = node.logs.join("\n");
    expect(logs).toContain("call refused by authentication or authorisation");
    for (const t of [...Object.values(tokens), bad]) expect(logs).not.toContain(t);
    const audits = node.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.audit === true);
    expect(audits).toContainEqual(expect.objectContaining({ identity: "admin-token", rpc: "AdminService/PauseQueue", outcome: "OK", request: expect.stringContaining(QUEUE) }));
    // Only admin actions are audited, and only after the call was allowed.
    expect(audits.every((a) => a.identity === "admin-token" && String(a.rpc).startsWith("AdminService/"))).toBe(true);
  });

  it("keeps /metrics behind reader and /healthz open", async () => {
    expect((await rawHttp(node.httpAddress, "/metrics")).status).toBe(401);
    expect((await rawHttp(node.httpAddress, "/metrics", { headers: { authorization: `Bearer ${tokens.producer}` } })).status).toBe(403);
    expect((await rawHttp(node.httpAddress, "/metrics", { headers: { authorization: `Bearer ${tokens.admin}` } })).status).toBe(200);
    expect((await rawHttp(node.httpAddress, "/healthz")).status).toBe(200);
  });
});
