/**
 * Tokens scoped to queue patterns, against a real node: every RPC called by a scoped admin
 * token (every role, so only the scope decides) on a queue outside its patterns is
 * refused (PERMISSION_DENIED, or NOT_FOUND for a task addressed by id) with proof that
 * nothing changed, over gRPC and the JSON API; the same RPCs on a queue inside pass;
 * cross-queue answers are cut to the scope; refusals are logged and counted; /metrics
 * needs an unscoped reader.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, fromJson, toJson, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { ConveyorError } from "../../src/base/errors.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { LimitStrategy } from "../../src/gen/conveyor/v1/task_pb.js";
import { TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { WorkerService } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { eventually, NodeProcess } from "../support/node-process.js";
import { authFileWithRoles, jsonApi, matrixRequest, rawHttp, taskSpecIn, type RoleName } from "../support/security.js";

const SERVICES: DescService[] = [TaskService, WorkerService, AdminService];
const JSON_SERVICES = new Set(["TaskService", "AdminService"]);
const PATTERN = "scoped-*";
const IN = "scoped-in";
const OUT = "other-out";
const IN_REMOVABLE = "scoped-removable";
const OUT_REMOVABLE = "other-removable";

/** Operator rules apply in every queue, and a drain or move moves whole partitions: only an unscoped admin does these. */
const EVERY_QUEUE_WRITES = new Set(["AdminService/SetStrategies", "AdminService/DeleteStrategies", "AdminService/DrainNode", "AdminService/MovePartition"]);

/** Each walk makes a few hundred calls (a snapshot around every refusal): on a loaded 2-core machine that takes a while. */
const WALK_TIMEOUT_MS = 90_000;

const stringify = (v: unknown) => JSON.stringify(v, (_k, x: unknown) => (typeof x === "bigint" ? x.toString() : x));

/**
 * What a caller scoped to `scoped-*` gets for a request aimed outside its scope, written
 * from the request and the issue (not from roles.ts, so a wrong row there fails here).
 */
function expectedOutside(rpc: string, request: Record<string, unknown>): string {
  if (typeof request.id === "string") return "NOT_FOUND"; // a task in another queue is as unknown as no task
  if (stringify(request).includes('"other-')) return "PERMISSION_DENIED";
  if (EVERY_QUEUE_WRITES.has(rpc)) return "PERMISSION_DENIED";
  return "OK"; // node-wide, or an answer about every queue cut to the scope
}

describe("tokens scoped to queue patterns", () => {
  let node: NodeProcess;
  let tokens: Record<RoleName, string>;
  let scopedTokens: Record<RoleName, string>;
  let admin: RpcChannel;
  let scoped: RpcChannel;
  let outTask: string;

  const rpcs = () => SERVICES.flatMap((s) => (s.methods as DescMethod[]).map((m) => ({ service: s, method: m, rpc: `${s.name}/${m.name}` })));

  /** Everything an RPC could change, in and out of the scope, read with the unscoped admin token. */
  async function snapshot(): Promise<string> {
    const a = admin.service(AdminService);
    return stringify(await Promise.all([
      a.listQueues({}), a.listTasks({ queue: IN, pageSize: 1000 }), a.listTasks({ queue: OUT, pageSize: 1000 }), a.listConcurrencyLimits({}),
      a.listRateLimits({}), a.listGroupConfigs({}), a.listStrategies({}), a.listSchedules({}),
    ]));
  }

  async function code(channel: RpcChannel, service: DescService, method: DescMethod, request: unknown): Promise<{ code: string; error?: ConveyorError; response?: unknown }> {
    const client = channel.service(service as typeof AdminService) as unknown as Record<string, (r: unknown, o: unknown) => Promise<unknown>>;
    try {
      return { code: "OK", response: await client[method.localName]!(request, { timeoutMs: 5_000 }) };
    } catch (e) {
      if (!(e instanceof ConveyorError)) throw e;
      return { code: e.code, error: e };
    }
  }

  /** State for each queue that the requests would change if they were let through. */
  async function seed(queue: string, removable: string): Promise<string> {
    const a = admin.service(AdminService);
    const task = (await admin.service(TaskService).enqueue({ task: taskSpecIn(queue) })).result!.id;
    const cancelled = (await admin.service(TaskService).enqueue({ task: taskSpecIn(queue) })).result!.id;
    await admin.service(TaskService).cancelTask({ id: cancelled }); // BulkTaskAction would delete it
    await a.setQueueConcurrencyLimit({ queue, max: 3 });
    await a.setQueueRateLimit({ queue, ratePerSec: 100 });
    await a.setQueueRateLimit({ queue: removable, ratePerSec: 5 });
    await a.setGroupConfig({ config: { queue, group: "g", maxSize: 5, maxDelayMs: 1000n, graceMs: 1000n } });
    await a.setSchedule({ schedule: { name: "s", task: { queue, type: "t" }, cadence: { case: "intervalMs", value: 3_600_000n } } });
    return task;
  }

  beforeAll(async () => {
    const auth = authFileWithRoles({ scoped: [PATTERN] });
    ({ tokens, scopedTokens } = auth);
    node = await NodeProcess.start({ settings: { auth_file: auth.file } });
    admin = new RpcChannel({ address: node.grpcAddress, token: tokens.admin });
    scoped = new RpcChannel({ address: node.grpcAddress, token: scopedTokens.admin });
    await seed(IN, IN_REMOVABLE);
    outTask = await seed(OUT, OUT_REMOVABLE);
    await admin.service(AdminService).setStrategies({ type: "t", rules: [{ expression: "input.k", maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] });
  });

  afterAll(async () => {
    admin?.close();
    scoped?.close();
    await node?.stop();
    node?.cleanup();
  });

  /** The request aimed outside the scope, as the message carries it (fields its type lacks dropped). */
  const outside = (method: DescMethod, rpc: string) =>
    toJson(method.input, create(method.input, matrixRequest(rpc, { queue: OUT, removableQueue: OUT_REMOVABLE, taskId: outTask }) as never)) as Record<string, unknown>;

  it("over gRPC, every RPC aimed outside the scope is refused and changes nothing; answers about every queue are cut to it", async () => {
    let refusals = 0;
    for (const { service, method, rpc } of rpcs()) {
      const request = outside(method, rpc);
      const expected = expectedOutside(rpc, request);
      const before = await snapshot();
      const got = await code(scoped, service, method, fromJson(method.input, request as never));
      expect(got.code, `${rpc}: ${got.error?.message}`).toBe(expected);
      if (expected === "OK") continue;
      expect(await snapshot(), `${rpc} changed state`).toBe(before);
      if (expected === "PERMISSION_DENIED") {
        expect(got.error).toMatchObject({ reason: "QUEUE_NOT_IN_SCOPE", message: expect.stringContaining("admin-scoped (queues: scoped-*)") });
        if (stringify(request).includes('"other-')) expect(got.error!.message).toMatch(/may not touch queue "other-/);
      } else {
        // Word for word what an unknown id gets: the task's existence is not confirmed.
        expect(got.error).toMatchObject({ reason: "TASK_NOT_FOUND", message: `task "${outTask}" not found` });
      }
      refusals++;
    }
    expect(refusals).toBeGreaterThan(30);
    // A request about every queue that cannot be cut to a scope needs a queue named.
    await expect(scoped.service(AdminService).getActivity({})).rejects.toMatchObject({ code: "PERMISSION_DENIED", message: expect.stringContaining("for every queue") });
    const a = scoped.service(AdminService);
    const names = (await a.listQueues({})).queues.map((q) => q.name);
    expect(names).toContain(IN);
    expect(names.every((n) => n.startsWith("scoped-"))).toBe(true);
    expect((await admin.service(AdminService).listQueues({})).queues.map((q) => q.name)).toContain(OUT);
    expect((await a.listConcurrencyLimits({})).limits.map((l) => l.queue)).toEqual([IN]);
    expect((await a.listRateLimits({})).limits.map((l) => l.queue).sort()).toEqual([IN, IN_REMOVABLE]);
    expect((await a.listGroupConfigs({})).configs.map((c) => c.queue)).toEqual([IN]);
    expect((await a.listSchedules({})).schedules.map((s) => s.task!.queue)).toEqual([IN]);
  }, WALK_TIMEOUT_MS);

  it("over the JSON API, the same refusals answer 403 or 404 and change nothing", async () => {
    for (const { method, rpc } of rpcs().filter((r) => JSON_SERVICES.has(r.service.name))) {
      const request = outside(method, rpc);
      const expected = expectedOutside(rpc, request);
      if (expected === "OK") continue;
      const before = await snapshot();
      const res = await jsonApi(node.httpAddress, rpc, request, scopedTokens.admin);
      expect(res.status, `${rpc}: ${res.body}`).toBe(expected === "NOT_FOUND" ? 404 : 403);
      expect(JSON.parse(res.body).code).toBe(expected);
      expect(await snapshot(), `${rpc} changed state`).toBe(before);
    }
    const list = await jsonApi(node.httpAddress, "AdminService/ListQueues", {}, scopedTokens.reader);
    expect(list.status).toBe(200);
    expect((JSON.parse(list.body) as { queues: Array<{ name: string }> }).queues.map((q) => q.name)).not.toContain(OUT);
  }, WALK_TIMEOUT_MS);

  it("every RPC aimed inside the scope passes it", async () => {
    for (const { service, method, rpc } of rpcs().filter((r) => !EVERY_QUEUE_WRITES.has(r.rpc))) {
      // Each task-id RPC gets a fresh task of its own (an earlier one may have deleted the last).
      const taskId = (await admin.service(TaskService).enqueue({ task: taskSpecIn(IN) })).result!.id;
      const got = await code(scoped, service, method, matrixRequest(rpc, { queue: IN, removableQueue: IN_REMOVABLE, taskId }));
      const refused = ["PERMISSION_DENIED", "UNAUTHENTICATED"].includes(got.code) || got.error?.reason === "TASK_NOT_FOUND";
      expect(refused, `${rpc}: ${got.code} ${got.error?.message}`).toBe(false);
    }
    // The requests acted (so the refusals above proved something).
    const a = admin.service(AdminService);
    expect((await a.listGroupConfigs({ queue: IN })).configs.map((g) => g.group)).toContain("g2");
    expect((await a.listQueues({})).queues.map((q) => q.name)).not.toContain(IN_REMOVABLE);
    expect((await a.listQueues({})).queues.map((q) => q.name)).toContain(OUT_REMOVABLE);
  }, WALK_TIMEOUT_MS);

  it("a scoped producer and reader: their role and their scope both hold", async () => {
    const producer = new RpcChannel({ address: node.grpcAddress, token: scopedTokens.producer });
    try {
      const t = producer.service(TaskService);
      const id = (await t.enqueue({ task: taskSpecIn(IN) })).result!.id;
      expect((await t.getTask({ id })).task!.queue).toBe(IN);
      await expect(t.enqueue({ task: taskSpecIn(OUT) })).rejects.toMatchObject({ code: "PERMISSION_DENIED", reason: "QUEUE_NOT_IN_SCOPE" });
      // An empty queue is the default queue, which scoped-* does not hold.
      await expect(t.enqueue({ task: taskSpecIn("") })).rejects.toMatchObject({ code: "PERMISSION_DENIED", message: expect.stringContaining('"default"') });
      await expect(t.getTask({ id: outTask })).rejects.toMatchObject({ code: "NOT_FOUND" });
      await expect(producer.service(AdminService).pauseQueue({ queue: IN })).rejects.toMatchObject({ code: "PERMISSION_DENIED", reason: "ROLE_REQUIRED" });
    } finally {
      producer.close();
    }
    const whoami = await rawHttp(node.httpAddress, "/auth/whoami", { headers: { host: node.httpAddress, authorization: `Bearer ${scopedTokens.reader}` } });
    expect(JSON.parse(whoami.body)).toMatchObject({ name: "reader-scoped", roles: ["reader"], queues: [PATTERN] });
  });

  it("/metrics needs an unscoped reader; scope refusals are logged and counted without the token", async () => {
    const denied = await rawHttp(node.httpAddress, "/metrics", { headers: { authorization: `Bearer ${scopedTokens.reader}` } });
    expect(denied.status).toBe(403);
    expect(JSON.parse(denied.body)).toMatchObject({ reason: "QUEUE_NOT_IN_SCOPE", message: expect.stringContaining("reader-scoped") });
    const metrics = await rawHttp(node.httpAddress, "/metrics", { headers: { authorization: `Bearer ${tokens.reader}` } });
    expect(metrics.status).toBe(200);
    const count = (transport: string) =>
      Number(new RegExp(`conveyor_auth_failures_total\\{transport="${transport}",reason="QUEUE_NOT_IN_SCOPE"\\} (\\d+)`).exec(metrics.body)?.[1] ?? 0);
    expect(count("grpc")).toBeGreaterThan(30);
    expect(count("http")).toBeGreaterThan(10);
    const refusals = () => node.logs.map((l) => JSON.parse(l) as { refused?: { reason: string; identity?: string; what: string; queue?: string } }).filter((l) => l.refused?.reason === "QUEUE_NOT_IN_SCOPE");
    // The node's log lines reach this process after its answers: wait for the last one.
    await eventually("the /metrics refusal in the log", async () => (refusals().some((r) => r.refused!.what === "/metrics") ? true : undefined), 5_000);
    // Task ids in another queue answer NOT_FOUND, but the node logs them as what they were.
    expect(refusals().map((r) => r.refused!.what)).toEqual(expect.arrayContaining(["TaskService/GetTask", "AdminService/PauseQueue", "/metrics"]));
    expect(refusals().every((r) => r.refused!.identity?.endsWith("-scoped"))).toBe(true);
    expect(refusals().find((r) => r.refused!.what === "AdminService/PauseQueue")!.refused).toMatchObject({ queue: OUT });
    const logs = node.logs.join("\n");
    for (const t of [...Object.values(tokens), ...Object.values(scopedTokens)]) expect(logs).not.toContain(t);
  });
});
