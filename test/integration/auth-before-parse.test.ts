/**
 * A request without valid credentials costs the node no more than a small valid one
 * (issue 34, item 6): the node authenticates on the headers, before it reads or decodes a
 * body, on both transports; and an authenticated caller's body is bounded in nesting
 * before the parser runs. Measured against a real node with an auth file while a separate
 * process probes GET /healthz back to back (health-probe.ts).
 *
 * The requests are the issue's: a JSON body of a million nested brackets to the JSON API
 * (~0.55-0.9 s of the node's thread each before the fix, answered 400 instead of 401),
 * and 4 MiB of the byte 0x0b (a protobuf group start, repeated) to TaskService/Enqueue
 * over gRPC (~0.4-0.7 s of decoding before UNAUTHENTICATED).
 *
 * The bound: the issue demands health p99 ≤ 50 ms meanwhile. Each probe's figure is the
 * time the node's event loop kept it waiting (its main thread's CPU time during the
 * probe, capped by the probe's wall time: health-prober.mjs), so another test run on this
 * shared 2-core machine taking the core away does not count against the node; wall
 * latencies are printed beside it. Probes run back to back, so a stall of 400 ms holds
 * up one probe while hundreds of quick ones pass: a p99 over probes can miss stalls that
 * take most of the time. So the test also takes, for each round of requests, the longest
 * wait of a probe in flight during it, and holds the median over the rounds to the same
 * 50 ms (as event-loop.test.ts does): work that is not bounded stalls every round, a
 * one-off pause of the process does not fail the test.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { REQUEST_MAX_BYTES, REQUEST_NESTING_MAX_DEPTH } from "../../src/base/limits.js";
import { NodeProcess } from "../support/node-process.js";
import { probeDuring, worstBetween, type Probe } from "../support/health-probe.js";
import { authFileWithRoles, jsonApi, rawHttp, type RawResponse, type RoleName } from "../support/security.js";

const HEALTH_P99_MAX_MS = 50;
/** One request in flight at a time (as in the issue), rounds of them: enough probes to read a p99 from. */
const IN_FLIGHT = 1;
const ROUNDS = 8;

const DEPTH = 1_000_000;
const deepJson = "[".repeat(DEPTH) + "]".repeat(DEPTH);
const groupStarts = Buffer.alloc(REQUEST_MAX_BYTES - 64, 0x0b);

let node: NodeProcess;
let tokens: Record<RoleName, string>;
let grpcClient: grpc.Client;

beforeAll(async () => {
  const auth = authFileWithRoles();
  tokens = auth.tokens;
  node = await NodeProcess.start({ settings: { auth_file: auth.file } });
  grpcClient = new grpc.Client(node.grpcAddress, grpc.credentials.createInsecure());
});

afterAll(async () => {
  grpcClient?.close();
  await node?.stop();
  node?.cleanup();
});

const postDeep = (token?: string): Promise<RawResponse> =>
  rawHttp(node.httpAddress, "/api/conveyor.v1.AdminService/ListQueues", {
    method: "POST", body: deepJson,
    headers: { "content-type": "application/json", host: node.httpAddress, ...(token ? { authorization: `Bearer ${token}` } : {}) },
  });

/** Raw bytes as a gRPC request (no encoding on the way out), the status it ends with. */
function rawEnqueue(bytes: Buffer, token?: string): Promise<grpc.ServiceError | undefined> {
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  return new Promise((resolve) => {
    grpcClient.makeUnaryRequest("/conveyor.v1.TaskService/Enqueue", (b: Buffer) => b, (b: Buffer) => b, bytes, metadata,
      { deadline: Date.now() + 30_000 }, (error) => resolve(error ?? undefined));
  });
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
};

/**
 * Sends `request` IN_FLIGHT at a time, ROUNDS times, under the health prober; returns the
 * answers, after printing and checking the probes' p99 against the issue's bound.
 */
async function underProbe<T>(what: string, request: () => Promise<T>): Promise<T[]> {
  await request(); // the first of a kind compiles code paths V8 has not seen yet: not a cost a caller can impose at will
  const answers: T[] = [];
  const rounds: Array<[number, number]> = [];
  const report = await probeDuring(node, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const startMs = Date.now();
      answers.push(...(await Promise.all(Array.from({ length: IN_FLIGHT }, request))));
      rounds.push([startMs, Date.now()]);
    }
  });
  expect(report.failures, `${what}: health probes failed (${report.lastError})`).toBe(0);
  const blocked = report.during.map((p: Probe) => p.blockedMs);
  const wall = report.during.map((p: Probe) => p.wallMs);
  const figures = {
    probes: blocked.length, blockedP50: percentile(blocked, 50), blockedP99: percentile(blocked, 99),
    wallP50: percentile(wall, 50), wallP99: percentile(wall, 99), cpuMeasured: report.cpuMeasured,
    worstPerRound: rounds.map(([a, b]) => worstBetween(report.during, a, b)?.blockedMs ?? NaN),
  };
  console.log(`${what}: health probes during ${ROUNDS} rounds of ${IN_FLIGHT} requests (ms): ${JSON.stringify(figures, (_k, v: unknown) => (typeof v === "number" ? Math.round(v * 10) / 10 : v))}`);
  expect(blocked.length, `${what}: probes ran during the requests`).toBeGreaterThan(0);
  expect(figures.blockedP99, `${what}: health p99 (event-loop wait) ≤ ${HEALTH_P99_MAX_MS} ms`).toBeLessThanOrEqual(HEALTH_P99_MAX_MS);
  expect(percentile(figures.worstPerRound, 50), `${what}: median over rounds of the longest probe wait ≤ ${HEALTH_P99_MAX_MS} ms`)
    .toBeLessThanOrEqual(HEALTH_P99_MAX_MS);
  return answers;
}

describe("the JSON API authenticates before it reads the body", () => {
  it("a million nested brackets without a token: 401 at once, health p99 within the bound", async () => {
    const answers = await underProbe("JSON API, deep body, no token", () => postDeep());
    for (const answer of answers) {
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.body)).toMatchObject({ code: "UNAUTHENTICATED", reason: "CREDENTIALS_REQUIRED" });
    }
  });

  it("a token without the RPC's role is refused on the headers too (403)", async () => {
    const answer = await rawHttp(node.httpAddress, "/api/conveyor.v1.AdminService/PauseQueue", {
      method: "POST", body: deepJson, headers: { "content-type": "application/json", host: node.httpAddress, authorization: `Bearer ${tokens.producer}` },
    });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body)).toMatchObject({ code: "PERMISSION_DENIED", reason: "ROLE_REQUIRED" });
  });

  it("the same body with a valid token: a 400 naming the nesting limit, health p99 within the bound", async () => {
    const answers = await underProbe("JSON API, deep body, reader token", () => postDeep(tokens.reader));
    for (const answer of answers) {
      expect(answer.status).toBe(400);
      const body = JSON.parse(answer.body) as { code: string; reason: string; message: string };
      expect(body).toMatchObject({ code: "INVALID_ARGUMENT", reason: "BAD_JSON" });
      expect(body.message).toContain(`deeper than ${REQUEST_NESTING_MAX_DEPTH} levels`);
    }
  });

  it("a body nested within the limit is still served", async () => {
    const res = await jsonApi(node.httpAddress, "AdminService/ListQueues", {}, tokens.reader);
    expect(res.status).toBe(200);
  });
});

describe("gRPC authenticates on the metadata, before it decodes the message", () => {
  it("4 MiB of group starts without a token: UNAUTHENTICATED, health p99 within the bound", async () => {
    const answers = await underProbe("gRPC Enqueue, 4 MiB of 0x0b, no token", () => rawEnqueue(groupStarts));
    for (const error of answers) {
      expect(error?.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(error?.details).toContain("requires a token");
    }
  });

  it("the same bytes with a producer's token: INVALID_ARGUMENT naming the nesting limit, health p99 within the bound", async () => {
    const answers = await underProbe("gRPC Enqueue, 4 MiB of 0x0b, producer token", () => rawEnqueue(groupStarts, tokens.producer));
    for (const error of answers) {
      expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(error?.details).toContain(`deeper than ${REQUEST_NESTING_MAX_DEPTH} levels`);
    }
  });

  it("a role the RPC does not allow is refused on the metadata (PERMISSION_DENIED)", async () => {
    const error = await rawEnqueue(groupStarts, tokens.reader);
    expect(error?.code).toBe(grpc.status.PERMISSION_DENIED);
  });
});
