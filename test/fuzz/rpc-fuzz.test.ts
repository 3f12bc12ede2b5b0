/**
 * RPC fuzz suite (issue 9): every RPC of every service generated in src/gen gets, on a
 * real node and alongside a stream of valid requests (fuzz-requests.ts makes them all):
 * - a sweep: every field, at any depth, set to each of its boundary values in an
 *   otherwise plausible request, and an invalid UTF-8 string in each string field;
 * - random bytes (and typed requests cut short or with bytes flipped);
 * - random typed requests: one or two boundary values in a plausible request, or every
 *   field random.
 * The requests to TaskService and WorkerService also go as calls on one session
 * (SessionService: the SDK's transport), judged the same way, none ending the session.
 * After each round of fuzz requests:
 * - every fuzz request was answered, with a status a caller can act on: never INTERNAL
 *   or UNKNOWN (a bug), UNAVAILABLE (retryable: bad input never is), DATA_LOSS, or a
 *   missed deadline (a stall); a success decodes as the method's response;
 * - every valid neighbour (enqueues made in the same moments, then leased and completed)
 *   succeeded, and the counts per state of the valid queue changed by exactly them;
 * - the queues the fuzz requests named still serve a Lease and a Settle (no value left
 *   behind can poison a queue);
 * - the node answers GET /healthz.
 * ClusterService (node to node) is served only by a cluster member: its requests go to a
 * one-member cluster on a real etcd, judged the same way (a node alone answers
 * UNIMPLEMENTED, test/cluster/accept-partition.test.ts).
 *
 * Deterministic given a seed: FUZZ_SEED=<n> replays a run (the default is fixed, so CI
 * runs the same cases every time); FUZZ_SEED=random explores new ones, FUZZ_RUNS=<n>
 * runs more. A failure prints the seed, fast-check's counterexample path, and the
 * command that replays it. FUZZ_COLLECT=1 lists every violation instead of failing at
 * the first; FUZZ_TRACE=1 prints every request with its answer.
 */
import * as grpc from "@grpc/grpc-js";
import fc from "fast-check";
import { fromBinary } from "@bufbuild/protobuf";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";
import type { SessionResponse } from "../../src/gen/conveyor/v1/session_service_pb.js";
import { encodeSessionCall, sessionDefinition } from "../../src/rpc/session-frames.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { json, newTask } from "../../src/index.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { checkQueueName } from "../../src/server/validate.js";
import { startEtcd, type EtcdCluster } from "../support/etcd.js";
import { NodeProcess } from "../support/node-process.js";
import { connect } from "../support/sdk.js";
import { allMethods, boundarySweep, rawBytesArb, typedRequestArb, type FuzzContext, type FuzzMethod, type FuzzRequest } from "./fuzz-requests.js";

const methods = await allMethods();

const seedText = process.env.FUZZ_SEED ?? "20240917";
const BASE_SEED = seedText === "random" ? Math.floor(Math.random() * 2 ** 31) : Number(seedText);
if (!Number.isSafeInteger(BASE_SEED)) throw new Error(`FUZZ_SEED must be an integer or "random", got ${JSON.stringify(seedText)}`);
/** Runs per RPC (each sends up to REQUESTS_MAX fuzz requests); FUZZ_RUNS scales a deeper search. */
const RUNS = Number(process.env.FUZZ_RUNS ?? 10);
const REQUESTS_MAX = 6;
/** Set FUZZ_COLLECT=1 to log every violation and go on (exploring), instead of failing. */
const COLLECT = process.env.FUZZ_COLLECT === "1";
const CALL_TIMEOUT_MS = 4_000;

/** Statuses no request may get: a bug, a stall, or bad input reported as retryable. */
const FORBIDDEN = new Map<number, string>([
  [grpc.status.INTERNAL, "INTERNAL"], [grpc.status.UNKNOWN, "UNKNOWN"], [grpc.status.UNAVAILABLE, "UNAVAILABLE"],
  [grpc.status.DATA_LOSS, "DATA_LOSS"], [grpc.status.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"], [grpc.status.UNIMPLEMENTED, "UNIMPLEMENTED"],
]);

interface Target { node: NodeProcess; sdk: ReturnType<typeof connect> }
/** The node a test fuzzes (a describe's beforeAll picks it), and its SDK. */
let node: NodeProcess;
let sdk: ReturnType<typeof connect>;
let solo: Target;
let member: Target | undefined;
let etcd: EtcdCluster | undefined;

/** A one-member cluster, started on first use: the only kind of node that serves ClusterService. */
async function clusterMember(): Promise<Target> {
  if (!member) {
    etcd = await startEtcd();
    const n = await NodeProcess.start({ settings: { lease_wait_max: "200ms", cluster_etcd: etcd.endpoints, cluster_name: "fuzz", node_id: "n1" } });
    member = { node: n, sdk: connect(n) };
  }
  return member;
}
const ctx: FuzzContext = { nowMs: Date.now() };
const violationsSeen: string[] = [];

beforeAll(async () => {
  // Short long polls: a fuzzed Lease parks at most this long.
  const n = await NodeProcess.start({ settings: { lease_wait_max: "200ms" } });
  solo = { node: n, sdk: connect(n) };
});

afterAll(async () => {
  if (COLLECT) console.log(`fuzz violations (${violationsSeen.length}):\n${violationsSeen.join("\n")}`);
  for (const t of [solo, member]) {
    await t?.sdk.close();
    await t?.node.stop();
    t?.node.cleanup();
  }
  await etcd?.stop();
});

/** A raw client: bytes in, bytes out, on a connection of its own (a stalled one harms nobody else). */
function rawClient(): grpc.Client {
  return new grpc.Client(node.grpcAddress, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
    "grpc.max_send_message_length": 64 * 1024 * 1024,
  });
}

interface Answer { code: number; details: string; response?: Buffer | undefined }

function send(client: grpc.Client, method: FuzzMethod, bytes: Uint8Array): Promise<Answer> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(method.path, (b: Buffer) => b, (b: Buffer) => b, Buffer.from(bytes), new grpc.Metadata(),
      { deadline: Date.now() + CALL_TIMEOUT_MS },
      (err, res) => resolve(err ? { code: err.code, details: err.details } : { code: grpc.status.OK, details: "", response: res }));
  });
}

/** Services whose calls the SDK carries on sessions: their fuzz requests go on a session too. */
const SESSION_SERVICES = new Set(["TaskService", "WorkerService"]);
/** Fuzz requests answered on a session (the suite checks it sent some). */
let sessionAnswers = 0;

/**
 * The same requests as calls on one session (SessionService): each must be answered on it
 * as a unary call is judged, and no request may end the session for the others.
 */
async function sendOnSession(method: FuzzMethod, requests: readonly Uint8Array[]): Promise<Array<Answer | string>> {
  const Ctor = grpc.makeGenericClientConstructor(sessionDefinition({}), "SessionService");
  const client = new Ctor(node.grpcAddress, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 }) as unknown as grpc.Client & {
    session(): grpc.ClientDuplexStream<Buffer, SessionResponse>;
  };
  const stream = client.session();
  const answers = new Map<number, Answer>();
  let ended: string | undefined;
  const done = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, CALL_TIMEOUT_MS);
    stream.on("data", (a: SessionResponse) => {
      const r = a.result;
      sessionAnswers++;
      answers.set(Number(a.callId), r.case === "response"
        ? { code: grpc.status.OK, details: "", response: Buffer.from(r.value) }
        : (() => {
            const status = fromBinary(StatusSchema, r.value as Uint8Array);
            return { code: status.code, details: status.message };
          })());
      if (answers.size === requests.length) {
        clearTimeout(timer);
        resolve();
      }
    });
    stream.on("error", () => {});
    stream.on("status", (st: grpc.StatusObject) => {
      ended = `the session ended ${grpc.status[st.code]}: ${st.details}`;
      clearTimeout(timer);
      resolve();
    });
  });
  requests.forEach((bytes, i) => stream.write(encodeSessionCall(i + 1, `conveyor.v1.${method.service}/${method.name}`, bytes, CALL_TIMEOUT_MS)));
  await done;
  stream.cancel();
  client.close();
  return requests.map((_, i) => answers.get(i + 1) ?? ended ?? "no answer on the session within the call timeout");
}

/** What is wrong with an answer to a fuzz request (undefined: nothing). */
function judge(method: FuzzMethod, answer: Answer): string | undefined {
  const forbidden = FORBIDDEN.get(answer.code);
  if (forbidden) return `${forbidden}: ${answer.details.slice(0, 300)}`;
  if (answer.code === grpc.status.OK) {
    try {
      fromBinary(method.output, answer.response!);
    } catch (e) {
      return `OK, but the response does not decode: ${(e as Error).message}`;
    }
  }
  return undefined;
}

async function healthy(): Promise<string | undefined> {
  try {
    const res = await fetch(`http://${node.httpAddress}/healthz`, { signal: AbortSignal.timeout(5_000) });
    return res.status === 200 ? undefined : `GET /healthz answered ${res.status}`;
  } catch (e) {
    return `GET /healthz failed: ${String(e)}`;
  }
}

/** The valid queue of each test, and how many tasks it has completed so far. */
const validDone = new Map<string, number>();

/** Enqueues valid tasks (through the SDK: coalesced with each other) while `alongside` runs. */
async function validStream(queue: string, alongside: Promise<void>): Promise<string[]> {
  const problems: string[] = [];
  const enqueued = await Promise.all(Array.from({ length: 3 }, (_, i) =>
    sdk.client.enqueue(newTask("valid-stream:type", json({ i })), { queue }).then(
      (info) => info.id,
      (e: unknown) => {
        problems.push(`a valid enqueue failed: ${String(e)}`);
        return undefined;
      },
    )));
  await alongside;
  const ids = new Set(enqueued.filter((id): id is string => id !== undefined));
  for (let attempt = 0; ids.size > 0 && attempt < 20; attempt++) {
    let deliveries;
    try {
      deliveries = (await sdk.workerRpc.lease({ workerId: "valid-stream:worker", queues: [{ queue, weight: 1 }], maxDeliveries: 100, waitMs: 0 }, { timeoutMs: CALL_TIMEOUT_MS })).deliveries;
    } catch (e) {
      problems.push(`a valid Lease failed: ${String(e)}`);
      break;
    }
    if (deliveries.length === 0) continue;
    try {
      const res = await sdk.workerRpc.settle({
        workerId: "valid-stream:worker",
        settlements: deliveries.map((d) => ({ queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome: Outcome.SUCCESS })),
      }, { timeoutMs: CALL_TIMEOUT_MS });
      res.results.forEach((r) => (r.error ? problems.push(`a valid settlement failed: ${r.error.message}`) : ids.delete(r.taskId)));
    } catch (e) {
      problems.push(`a valid Settle failed: ${String(e)}`);
      break;
    }
  }
  if (ids.size > 0) problems.push(`${ids.size} valid tasks were not leased and completed`);
  validDone.set(queue, (validDone.get(queue) ?? 0) + enqueued.filter((id) => id !== undefined).length);
  try {
    const listed = await sdk.admin.listQueues({}, { timeoutMs: CALL_TIMEOUT_MS });
    const counts = listed.queues.find((q) => q.name === queue)?.counts;
    const c = Object.fromEntries(Object.entries(counts ?? {}).filter(([, v]) => typeof v === "bigint").map(([k, v]) => [k, Number(v)])) as Record<string, number>;
    const expected = { completed: validDone.get(queue)!, pending: 0, active: 0, scheduled: 0, retry: 0, archived: 0, cancelled: 0, aggregating: 0 };
    for (const [state, n] of Object.entries(expected)) if ((c[state] ?? 0) !== n) problems.push(`the valid queue counts ${c[state]} ${state}, expected ${n}`);
  } catch (e) {
    problems.push(`ListQueues failed: ${String(e)}`);
  }
  return problems;
}

/** The queues fuzz requests named still serve: a Lease and the Settle of what it got. */
async function queuesServe(queues: readonly string[]): Promise<string[]> {
  const valid = [...new Set(queues)].filter((q) => {
    try {
      checkQueueName(q, "q");
      return true;
    } catch {
      return false;
    }
  }).slice(0, 50);
  if (valid.length === 0) return [];
  try {
    const res = await sdk.workerRpc.lease({ workerId: "fuzz:prober", queues: valid.map((queue) => ({ queue, weight: 1 })), maxDeliveries: 100, waitMs: 0 }, { timeoutMs: CALL_TIMEOUT_MS });
    const settlements = res.deliveries.flatMap((d) => d.tasks.map((t) => ({ queue: d.queue, leaseId: d.leaseId, taskId: t.id, outcome: Outcome.SUCCESS })));
    if (settlements.length === 0) return [];
    const settled = await sdk.workerRpc.settle({ workerId: "fuzz:prober", settlements }, { timeoutMs: CALL_TIMEOUT_MS });
    return settled.results.filter((r) => r.error?.code === grpc.status.INTERNAL).map((r) => `settling a task the fuzz enqueued failed: ${r.error!.message}`);
  } catch (e) {
    return [`a Lease on the queues the fuzz named (${valid.join(", ").slice(0, 200)}) failed: ${String(e)}`];
  }
}

/** The fuzz requests in parallel with the valid stream, then the checks; the violations found. */
async function fuzzRound(method: FuzzMethod, validQueue: string, requests: FuzzRequest[]): Promise<string[]> {
  const client = rawClient();
  const violations: string[] = [];
  try {
    const unary = Promise.all(requests.map(async (r) => {
      const answer = await send(client, method, r.bytes);
      if (process.env.FUZZ_TRACE) console.log(`${method.name} ${grpc.status[answer.code]} ${answer.details.slice(0, 80)} <- ${r.describe.slice(0, 200)}`);
      const problem = judge(method, answer);
      if (problem) violations.push(`${method.service}/${method.name} ${problem}\n    request: ${r.describe}`);
    }));
    // Requests over the node's 4 MiB frame limit never go on a session (the SDK sends them unary).
    const framed = requests.filter((r) => r.bytes.byteLength < 4 * 1024 * 1024 - 1024);
    const onSession = SESSION_SERVICES.has(method.service) && framed.length > 0
      ? sendOnSession(method, framed.map((r) => r.bytes)).then((answers) => answers.forEach((answer, i) => {
        const problem = typeof answer === "string" ? answer : judge(method, answer);
        if (problem) violations.push(`${method.service}/${method.name} on a session: ${problem}\n    request: ${framed[i]!.describe}`);
      }))
      : Promise.resolve();
    const fuzz = Promise.all([unary, onSession]).then(() => undefined);
    violations.push(...(await validStream(validQueue, fuzz)).map((p) => `${method.service}/${method.name} neighbour: ${p}`));
    violations.push(...(await queuesServe(requests.flatMap((r) => r.queues))).map((p) => `${method.service}/${method.name} after: ${p}`));
    const health = await healthy();
    if (health) violations.push(`${method.service}/${method.name} node: ${health}`);
  } finally {
    client.close();
  }
  return violations;
}

/** One fast-check run: a round that must find nothing wrong. */
async function fuzzRun(method: FuzzMethod, validQueue: string, requests: FuzzRequest[]): Promise<void> {
  const violations = await fuzzRound(method, validQueue, requests);
  if (COLLECT) {
    violationsSeen.push(...violations);
    return;
  }
  if (violations.length > 0) throw new Error(`${violations.length} violation(s):\n${violations.join("\n")}`);
}

function seedOf(name: string): number {
  let h = BASE_SEED | 0;
  for (const c of name) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return h >>> 0;
}

async function check(testName: string, arb: fc.Arbitrary<FuzzRequest[]>, method: FuzzMethod, validQueue: string) {
  const seed = seedOf(testName);
  try {
    await fc.assert(fc.asyncProperty(arb, (requests) => fuzzRun(method, validQueue, requests)), {
      seed, numRuns: RUNS, interruptAfterTimeLimit: 30_000,
    });
  } catch (e) {
    throw new Error(`${(e as Error).message}\n\nreplay: FUZZ_SEED=${BASE_SEED} npx vitest run test/fuzz -t ${JSON.stringify(testName)}`, { cause: e });
  }
}

/** Sweep requests sent together in one round. */
const SWEEP_ROUND = 40;

describe.each(methods.map((m, i) => [`${m.service}/${m.name}`, m, i] as const))("%s", (name, method, index) => {
  const validQueue = `valid-stream.q:${index}`;
  beforeAll(async () => {
    ({ node, sdk } = method.service === "ClusterService" ? await clusterMember() : solo);
  }, 30_000);

  it("every field at each of its boundary values", { timeout: 60_000 }, async () => {
    const requests = boundarySweep(method, ctx);
    const violations: string[] = [];
    for (let i = 0; i < requests.length; i += SWEEP_ROUND) violations.push(...await fuzzRound(method, validQueue, requests.slice(i, i + SWEEP_ROUND)));
    if (COLLECT) violationsSeen.push(...violations);
    else if (violations.length > 0) throw new Error(`${violations.length} violation(s) in ${requests.length} requests:\n${violations.join("\n")}`);
  });

  it("random bytes", { timeout: 60_000 }, async () => {
    await check(`${name} random bytes`, fc.array(rawBytesArb(method, ctx), { minLength: 1, maxLength: REQUESTS_MAX }), method, validQueue);
  });

  it("typed requests with boundary values", { timeout: 60_000 }, async () => {
    await check(`${name} typed requests with boundary values`, fc.array(typedRequestArb(method, ctx), { minLength: 1, maxLength: REQUESTS_MAX }), method, validQueue);
  });
});

describe("the suite itself", () => {
  it("covers every RPC of every generated service", () => {
    const services = new Set(methods.map((m) => m.service));
    expect([...services].sort()).toEqual(["AdminService", "ClusterService", "TaskService", "WorkerService"]);
    expect(methods.length).toBeGreaterThanOrEqual(30);
  });

  it("sent the TaskService and WorkerService requests on sessions too, and had them answered there", () => {
    expect(sessionAnswers).toBeGreaterThan(500);
  });
});
