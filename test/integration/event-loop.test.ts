/**
 * The node keeps answering while the worst requests the bounds allow run (issue 9,
 * finding 6): a separate process probes GET /healthz back to back while this test fires
 * each worst request REPEAT times, and the node may keep no probe waiting for its event
 * loop BLOCKED_MAX_MS or more.
 *
 * What is measured: for each probe, the CPU time the node's main thread used while the
 * probe waited (from /proc, see health-prober.mjs), capped by the probe's wall latency.
 * Wall latency alone would measure this shared 2-core machine more than the node (a
 * process waiting for a core shows tens of milliseconds of latency while the node is
 * idle); CPU time only grows while the event loop is actually busy.
 *
 * The threshold: the bounds keep every stretch of work to about 5-15 ms on this machine
 * when it is quiet (the largest: writing a 1 MiB row and committing it); under the load
 * of a parallel test run the same stretches use up to 2-3 times more CPU (caches and
 * cores are shared), and a young-generation GC can add a few milliseconds. Before the
 * bounds, these requests blocked the node for 0.8-2.6 s. 50 ms (the figure)
 * sits between the two with a margin on both sides.
 *
 * The statistic: for each repetition of a request, the longest wait of a probe in flight
 * during it; the median over the repetitions must stay under BLOCKED_MAX_MS. A request
 * whose work is not bounded stalls the node in every repetition, so the median catches
 * it; a one-off stall that any process can have (a garbage collection, the machine
 * taking the core away at a bad moment) does not fail the test.
 *
 * Each kind of request is sent once before the measurement: the first request of a kind
 * in a fresh process runs code that V8 has not compiled yet, several times slower (the
 * first evaluation of a costly rule took ~100-200 ms where the next ones take 2-5 ms).
 * That is a one-time cost per process, not a cost one request can impose at will.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LimitStrategy } from "../../src/gen/conveyor/v1/task_pb.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import {
  HEARTBEAT_LEASES_MAX, LEASE_QUEUES_MAX, REGISTER_RULES_MAX, REQUEST_MAX_BYTES, RULE_EVAL_COST_MAX, RULE_EXPRESSION_MAX_CHARS,
  RULE_INPUT_MAX_BYTES, SETTLEMENTS_MAX,
} from "../../src/base/limits.js";
import { compileMetered, withBudget } from "../../src/server/rules/cel-meter.js";
import { NodeProcess } from "../support/node-process.js";
import { connect } from "../support/sdk.js";
import { probeDuring, worstBetween } from "../support/health-probe.js";

const BLOCKED_MAX_MS = 50;
const BATCH = 1000;
const REPEAT = 5;

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;
let run = 0;
const fresh = (prefix: string) => `${prefix}-${++run}`;

beforeAll(async () => {
  node = await NodeProcess.start();
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

/**
 * Sends `request` once to warm up, then REPEAT times under the health prober, and checks
 * the median over the repetitions of the longest probe wait during each.
 */
async function worst(what: string, request: () => Promise<unknown>) {
  await request(); // warm: see the file comment
  const windows: Array<[number, number]> = [];
  const report = await probeDuring(node, async () => {
    for (let i = 0; i < REPEAT; i++) {
      const startMs = Date.now();
      await request();
      windows.push([startMs, Date.now()]);
    }
  });
  expect(report.failures, `${what}: health probes failed (${report.lastError})`).toBe(0);
  const worstPerRun = windows.map(([a, b]) => worstBetween(report.during, a, b));
  // A probe is always in flight (they run back to back): every repetition was measured.
  expect(worstPerRun.every((p) => p !== undefined), `${what}: a probe during every repetition`).toBe(true);
  const blocked = worstPerRun.map((p) => p!.blockedMs).sort((x, y) => x - y);
  if (process.env.PROBE_REPORT) console.log(`${what}: longest probe wait per repetition (ms): ${blocked.map((x) => x.toFixed(1)).join(" ")}`);
  expect(blocked[Math.floor(REPEAT / 2)], `${what}: median over ${REPEAT} repetitions of the longest time the node kept a health probe waiting (${report.cpuMeasured ? "node CPU" : "wall"} ms; all: ${blocked.map((x) => x.toFixed(1)).join(", ")})`)
    .toBeLessThan(BLOCKED_MAX_MS);
}

/** A payload of exactly `bytes` bytes of JSON: `fields` plus padding. */
function jsonPayload(fields: object, bytes: number): Uint8Array {
  const base = JSON.stringify({ ...fields, pad: "" });
  const text = JSON.stringify({ ...fields, pad: "x".repeat(bytes - base.length) });
  return new TextEncoder().encode(text);
}

describe("the node answers health checks while the worst allowed requests run", () => {
  it(`a Lease naming ${LEASE_QUEUES_MAX} queues it has never seen`, async () => {
    await worst("Lease", () => sdk.workerRpc.lease({
      workerId: "w", maxDeliveries: 1000, waitMs: 0,
      queues: Array.from({ length: LEASE_QUEUES_MAX }, (_, i) => ({ queue: `${fresh("lq")}-${i}`, weight: 1 })),
    }));
  });

  it(`a Heartbeat of ${HEARTBEAT_LEASES_MAX} leases in ${LEASE_QUEUES_MAX} queues it has never seen`, async () => {
    await worst("Heartbeat", () => {
      const prefix = fresh("hq");
      return sdk.workerRpc.heartbeat({
        workerId: "w", leases: Array.from({ length: HEARTBEAT_LEASES_MAX }, (_, i) => ({ queue: `${prefix}-${i % LEASE_QUEUES_MAX}`, leaseId: `lease-${i}` })),
      });
    });
  });

  it(`a Settle of ${SETTLEMENTS_MAX} real leases`, async () => {
    const queue = fresh("sq");
    for (let i = 0; i < (REPEAT + 1) * SETTLEMENTS_MAX; i += BATCH) {
      const res = await sdk.taskRpc.enqueueBatch({ tasks: Array.from({ length: BATCH }, () => ({ type: "t", queue })) });
      expect(res.items.every((item) => item.outcome.case === "result")).toBe(true);
    }
    await worst("Settle (and the Leases before it)", async () => {
      const deliveries = [];
      while (deliveries.length < SETTLEMENTS_MAX) deliveries.push(...await sdk.leaseNow(queue, 1000));
      const res = await sdk.workerRpc.settle({
        workerId: "w", settlements: deliveries.map((d) => ({ queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome: Outcome.SUCCESS })),
      });
      expect(res.results.filter((r) => r.error).length).toBe(0);
    });
  });

  it(`a full EnqueueBatch: ${BATCH} tasks, ~${REQUEST_MAX_BYTES / 1024 / 1024} MiB`, async () => {
    const queue = fresh("eq");
    const payload = new Uint8Array(Math.floor((REQUEST_MAX_BYTES - 128 * 1024) / BATCH) - 64);
    await worst("EnqueueBatch", async () => {
      const res = await sdk.taskRpc.enqueueBatch({ tasks: Array.from({ length: BATCH }, () => ({ type: "t", queue, payload })) });
      expect(res.items.every((i) => i.outcome.case === "result")).toBe(true);
    });
  });

  it(`an EnqueueBatch of ${BATCH} tasks in as many new queues`, async () => {
    await worst("EnqueueBatch (queues)", () => sdk.taskRpc.enqueueBatch({ tasks: Array.from({ length: BATCH }, (_, i) => ({ type: "t", queue: `${fresh("nq")}-${i}` })) }));
  });

  it(`an EnqueueTx of ${BATCH} tasks (one grain turn)`, async () => {
    const queue = fresh("tx");
    await worst("EnqueueTx", () => sdk.taskRpc.enqueueTx({ tasks: Array.from({ length: BATCH }, () => ({ type: "t", queue })) }));
  });

  it("an EnqueueBatch of tasks whose rules cost the most allowed, on the largest allowed payloads", async () => {
    // The most expensive rule found: nested comprehensions that build lists (the highest
    // time per cost unit measured), on the longest list that stays within the budget.
    const expression = "string(input.l.map(a, input.l.map(b, a + b).size()).size())";
    const program = compileMetered(expression);
    const cost = (n: number) => withBudget(Infinity, () => program({ input: { l: Array.from({ length: n }, (_, i) => i) }, additional_metadata: {} })).spent;
    let n = 1;
    while (cost(n + 1) <= RULE_EVAL_COST_MAX) n++;
    const payload = jsonPayload({ l: Array.from({ length: n }, (_, i) => i) }, RULE_INPUT_MAX_BYTES);
    const type = fresh("costly");
    await sdk.admin.setStrategies({ type, rules: [{ expression, maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] });
    const queue = fresh("cq");
    const perBatch = Math.floor((REQUEST_MAX_BYTES - 64 * 1024) / (RULE_INPUT_MAX_BYTES + 256));
    await worst("costly rules", async () => {
      const res = await sdk.taskRpc.enqueueBatch({ tasks: Array.from({ length: perBatch }, () => ({ type, queue, payload })) });
      expect(res.items.map((i) => i.outcome.case)).toEqual(Array(perBatch).fill("result"));
    });
    // One more element is over the budget: refused (this was the most the node allows).
    const over = jsonPayload({ l: Array.from({ length: n + 1 }, (_, i) => i) }, RULE_INPUT_MAX_BYTES);
    await expect(sdk.taskRpc.enqueue({ task: { type, queue, payload: over } })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "task.payload" });
  });

  it(`a RegisterTaskTypes of ${REGISTER_RULES_MAX} rules with the longest expressions`, async () => {
    const expression = (i: number, salt: string) => {
      const head = `input.k${i}${salt} == '`;
      return `${head}${"v".repeat(RULE_EXPRESSION_MAX_CHARS - head.length - 1)}'`;
    };
    await worst("RegisterTaskTypes", async () => {
      const salt = fresh("r").replace(/\W/g, "_");
      const perType = 16;
      await sdk.workerRpc.registerTaskTypes({
        workerId: "w",
        types: Array.from({ length: REGISTER_RULES_MAX / perType }, (_, t) => ({
          type: `${salt}-t${t}`,
          concurrency: Array.from({ length: perType }, (_, r) => ({ expression: expression(t * perType + r, salt), maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN })),
        })),
      });
    });
  });

  it("a Lease answered with a 1 MiB task", async () => {
    const queue = fresh("big");
    for (let i = 0; i <= REPEAT; i++) await sdk.taskRpc.enqueue({ task: { type: "t", queue, payload: new Uint8Array(1024 * 1024) } });
    await worst("Lease (1 MiB)", async () => {
      const ds = await sdk.leaseNow(queue, 1000);
      expect(ds.length).toBe(1);
    });
  });
});
