/**
 * Bounds on the work one request can cause (issue 9, finding 6), through a real node:
 * each bound refuses with INVALID_ARGUMENT naming the field and the maximum, refuses
 * without changing anything, and accepts the maximum itself; the SDK keeps to them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError, Mux, json, newTask } from "../../src/index.js";
import { LimitStrategy } from "../../src/gen/conveyor/v1/task_pb.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import {
  ENQUEUE_TX_MAX_BYTES, HEARTBEAT_LEASES_MAX, LEASE_BATCH_TYPES_MAX, LEASE_QUEUES_MAX, LEASE_RESPONSE_DELIVERIES_MAX, LEASE_RESPONSE_MAX_BYTES,
  REGISTER_RULES_MAX, REGISTER_TYPES_MAX, REQUEST_MAX_BYTES, RULE_EVAL_COST_MAX, RULE_EXPRESSION_MAX_CHARS, RULE_INPUT_MAX_BYTES,
  RULE_INPUT_MAX_DEPTH, RULE_KEY_MAX_CHARS, SETTLEMENTS_MAX,
} from "../../src/base/limits.js";
import { NodeProcess } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

beforeAll(async () => {
  node = await NodeProcess.start();
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

async function refusal(p: Promise<unknown>): Promise<ConveyorError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(ConveyorError);
  return e as ConveyorError;
}

/** Refused with INVALID_ARGUMENT naming `field`, with the maximum in the message. */
async function expectRefused(p: Promise<unknown>, field: string, max: number) {
  const e = await refusal(p);
  expect(e).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field });
  expect(e.message).toContain(String(max));
  return e;
}

async function totals(): Promise<Record<string, number>> {
  const res = await sdk.admin.listQueues({});
  const out: Record<string, number> = {};
  for (const q of res.queues) for (const [state, n] of Object.entries(q.counts ?? {})) if (typeof n === "bigint") out[state] = (out[state] ?? 0) + Number(n);
  return out;
}

const queues = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => ({ queue: `${prefix}-${i}`, weight: 1 }));

describe("bounds on list fields", () => {
  it(`Lease: at most ${LEASE_QUEUES_MAX} queues and ${LEASE_BATCH_TYPES_MAX} batch types`, async () => {
    await expectRefused(sdk.workerRpc.lease({ workerId: "w", queues: queues(LEASE_QUEUES_MAX + 1, "lq"), maxDeliveries: 1, waitMs: 0 }), "queues", LEASE_QUEUES_MAX);
    await expectRefused(sdk.workerRpc.lease({
      workerId: "w", queues: queues(1, "lq"), maxDeliveries: 1, waitMs: 0, batchTypes: Array.from({ length: LEASE_BATCH_TYPES_MAX + 1 }, (_, i) => `t${i}`),
    }), "batch_types", LEASE_BATCH_TYPES_MAX);
    const res = await sdk.workerRpc.lease({
      workerId: "w", queues: queues(LEASE_QUEUES_MAX, "lq"), maxDeliveries: 1, waitMs: 0, batchTypes: Array.from({ length: LEASE_BATCH_TYPES_MAX }, (_, i) => `t${i}`),
    });
    expect(res.deliveries).toEqual([]);
  });

  it(`Heartbeat: at most ${HEARTBEAT_LEASES_MAX} leases, in at most ${LEASE_QUEUES_MAX} queues`, async () => {
    const leases = (n: number, queueCount: number) => Array.from({ length: n }, (_, i) => ({ queue: `hb-${i % queueCount}`, leaseId: `l${i}` }));
    await expectRefused(sdk.workerRpc.heartbeat({ workerId: "w", leases: leases(HEARTBEAT_LEASES_MAX + 1, 1) }), "leases", HEARTBEAT_LEASES_MAX);
    await expectRefused(sdk.workerRpc.heartbeat({ workerId: "w", leases: leases(LEASE_QUEUES_MAX + 1, LEASE_QUEUES_MAX + 1) }), "leases", LEASE_QUEUES_MAX);
    const res = await sdk.workerRpc.heartbeat({ workerId: "w", leases: leases(HEARTBEAT_LEASES_MAX, LEASE_QUEUES_MAX) });
    expect(res.leases.length).toBe(HEARTBEAT_LEASES_MAX);
    expect(res.leases.every((l) => !l.held)).toBe(true);
  });

  it(`Settle: at most ${SETTLEMENTS_MAX} settlements, in at most ${LEASE_QUEUES_MAX} queues; a refused call settles nothing`, async () => {
    const queue = "settle-bound";
    await sdk.client.enqueue(newTask("t", json({})), { queue });
    const [d] = await sdk.leaseNow(queue, 1);
    const real = { queue, leaseId: d!.leaseId, taskId: d!.tasks[0]!.id, outcome: Outcome.SUCCESS };
    const filler = (n: number, queueCount: number) => Array.from({ length: n }, (_, i) => ({ queue: `${queue}-${i % queueCount}`, leaseId: "x", taskId: `t${i}`, outcome: Outcome.SUCCESS }));
    await expectRefused(sdk.workerRpc.settle({ workerId: "w", settlements: [real, ...filler(SETTLEMENTS_MAX, 1)] }), "settlements", SETTLEMENTS_MAX);
    await expectRefused(sdk.workerRpc.settle({ workerId: "w", settlements: [real, ...filler(LEASE_QUEUES_MAX, LEASE_QUEUES_MAX)] }), "settlements", LEASE_QUEUES_MAX);
    expect((await sdk.client.getTask(real.taskId)).state).toBe("active");
    const res = await sdk.workerRpc.settle({ workerId: "w", settlements: [real, ...filler(SETTLEMENTS_MAX - 1, LEASE_QUEUES_MAX - 1)] });
    expect(res.results[0]!.error).toBeUndefined();
    expect((await sdk.client.getTask(real.taskId)).state).toBe("completed");
  });

  it(`RegisterTaskTypes: at most ${REGISTER_TYPES_MAX} types and ${REGISTER_RULES_MAX} rules over all of them; a refused call registers nothing`, async () => {
    const rule = (i: number) => ({ expression: `input.k${i}`, maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN });
    await expectRefused(sdk.workerRpc.registerTaskTypes({
      workerId: "w", types: Array.from({ length: REGISTER_TYPES_MAX + 1 }, (_, i) => ({ type: `many-${i}`, concurrency: [] })),
    }), "types", REGISTER_TYPES_MAX);
    const perType = 16;
    const typesFor = (rules: number) => Array.from({ length: Math.ceil(rules / perType) }, (_, t) => ({
      type: `ruled-${t}`, concurrency: Array.from({ length: Math.min(perType, rules - t * perType) }, (_, r) => rule(t * perType + r)),
    }));
    await expectRefused(sdk.workerRpc.registerTaskTypes({ workerId: "w", types: typesFor(REGISTER_RULES_MAX + 1) }), "types", REGISTER_RULES_MAX);
    expect((await sdk.admin.listStrategies({})).types.filter((t) => t.type.startsWith("ruled-"))).toEqual([]);
    await sdk.workerRpc.registerTaskTypes({ workerId: "w", types: typesFor(REGISTER_RULES_MAX) });
    expect((await sdk.admin.listStrategies({})).types.filter((t) => t.type.startsWith("ruled-")).length).toBe(REGISTER_RULES_MAX / perType);
  });
});

describe("bounds on sizes", () => {
  it(`a request over ${REQUEST_MAX_BYTES} bytes is RESOURCE_EXHAUSTED and stores nothing`, async () => {
    const before = await totals();
    const payload = new Uint8Array(900 * 1024);
    const e = await refusal(sdk.taskRpc.enqueueBatch({ tasks: Array.from({ length: 5 }, () => ({ type: "t", queue: "too-big", payload })) }));
    expect(e.code).toBe("RESOURCE_EXHAUSTED");
    expect(await totals()).toEqual(before);
  });

  it("the SDK splits coalesced enqueues by size: many large payloads at once all succeed", async () => {
    const payload = { bytes: new Uint8Array(900 * 1024), contentType: "application/octet-stream" };
    const infos = await Promise.all(Array.from({ length: 6 }, () => sdk.client.enqueue(newTask("t", payload), { queue: "sdk-split" })));
    expect(infos.map((i) => i.state)).toEqual(Array(6).fill("pending"));
  });

  it(`an EnqueueTx carries at most ${ENQUEUE_TX_MAX_BYTES} bytes of payload`, async () => {
    const before = await totals();
    const payload = new Uint8Array(ENQUEUE_TX_MAX_BYTES / 2 + 1);
    await expectRefused(sdk.taskRpc.enqueueTx({ tasks: [{ type: "t", queue: "tx-big", payload }, { type: "t", queue: "tx-big", payload }] }), "tasks", ENQUEUE_TX_MAX_BYTES);
    expect(await totals()).toEqual(before);
  });

  it(`a Lease answer holds at most ${LEASE_RESPONSE_DELIVERIES_MAX} deliveries and about ${LEASE_RESPONSE_MAX_BYTES} bytes; the rest comes on the next calls`, async () => {
    const small = "answer-count";
    for (let i = 0; i < 2; i++) await sdk.taskRpc.enqueueBatch({ tasks: Array.from({ length: 100 }, () => ({ type: "t", queue: small })) });
    expect((await sdk.leaseNow(small, 1000)).length).toBe(LEASE_RESPONSE_DELIVERIES_MAX);
    expect((await sdk.leaseNow(small, 1000)).length).toBe(200 - LEASE_RESPONSE_DELIVERIES_MAX);

    const big = "answer-bytes";
    const size = Math.floor(LEASE_RESPONSE_MAX_BYTES / 3) + 1; // three of them pass the budget
    await sdk.taskRpc.enqueueBatch({ tasks: Array.from({ length: 7 }, () => ({ type: "t", queue: big, payload: new Uint8Array(size) })) });
    const answers = [];
    for (let got = 0; got < 7;) {
      const ds = await sdk.leaseNow(big, 1000);
      answers.push(ds.length);
      got += ds.length;
    }
    expect(answers).toEqual([3, 3, 1]);
  });

  it("a Worker with more queues than a Lease may name is refused at construction", () => {
    const many = Array.from({ length: LEASE_QUEUES_MAX + 1 }, (_, i) => `q${i}`);
    expect(() => sdk.worker(new Mux(), { queues: many })).toThrow(String(LEASE_QUEUES_MAX));
  });
});

describe("bounds on concurrency rules (CEL)", () => {
  const setRule = (type: string, expression: string, maxRunsExpression = "") =>
    sdk.admin.setStrategies({ type, rules: [{ expression, maxRuns: maxRunsExpression ? 0 : 5, maxRunsExpression, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] });
  const enqueueRaw = (type: string, text: string) =>
    sdk.taskRpc.enqueue({ task: { type, queue: "cel-bounds", payload: new TextEncoder().encode(text), contentType: "application/json" } });

  it(`an expression is at most ${RULE_EXPRESSION_MAX_CHARS} characters`, async () => {
    const long = `input.k == '${"v".repeat(RULE_EXPRESSION_MAX_CHARS)}'`;
    await expectRefused(setRule("long", long), "rules[0].expression", RULE_EXPRESSION_MAX_CHARS);
    await expectRefused(setRule("long", "'k'", long), "rules[0].max_runs_expression", RULE_EXPRESSION_MAX_CHARS);
    expect((await sdk.admin.listStrategies({})).types.find((t) => t.type === "long")).toBeUndefined();
  });

  it("matches() and message construction are refused at registration", async () => {
    const e = await refusal(setRule("re", "input.email.matches('a{1000}') ? 'x' : 'y'"));
    expect(e).toMatchObject({ code: "INVALID_ARGUMENT", field: "rules[0].expression" });
    expect(e.message).toContain("matches()");
    const m = await refusal(setRule("msg", "string(google.protobuf.Int64Value{value: 1})"));
    expect(m).toMatchObject({ code: "INVALID_ARGUMENT", field: "rules[0].expression" });
  });

  it(`tasks of a type with rules carry at most ${RULE_INPUT_MAX_BYTES} bytes of payload, nested at most ${RULE_INPUT_MAX_DEPTH} deep`, async () => {
    await setRule("sized", "input.k");
    const before = await totals();
    const fits = JSON.stringify({ k: "a", pad: "" });
    await expect(enqueueRaw("sized", JSON.stringify({ k: "a", pad: "x".repeat(RULE_INPUT_MAX_BYTES - fits.length) }))).resolves.toBeDefined();
    await expectRefused(enqueueRaw("sized", JSON.stringify({ k: "a", pad: "x".repeat(RULE_INPUT_MAX_BYTES - fits.length + 1) })), "task.payload", RULE_INPUT_MAX_BYTES);
    const nest = (depth: number) => `{"k":"a","d":${"[".repeat(depth - 1)}${"]".repeat(depth - 1)}}`;
    await expect(enqueueRaw("sized", nest(RULE_INPUT_MAX_DEPTH))).resolves.toBeDefined();
    await expectRefused(enqueueRaw("sized", nest(RULE_INPUT_MAX_DEPTH + 1)), "task.payload", RULE_INPUT_MAX_DEPTH);
    const after = await totals();
    expect((after.pending ?? 0) - (before.pending ?? 0)).toBe(2);
    // A type without rules takes the same payload: the bound is about what rules read.
    await expect(enqueueRaw("no-rules", JSON.stringify({ k: "a", pad: "x".repeat(RULE_INPUT_MAX_BYTES) }))).resolves.toBeDefined();
  });

  it(`one task's rule evaluation costs at most ${RULE_EVAL_COST_MAX} units; in a batch the costly item fails alone`, async () => {
    await setRule("costly", "string(input.l.exists(x, input.l.exists(y, y == x + 0.5)))");
    const list = (n: number) => JSON.stringify({ l: Array.from({ length: n }, (_, i) => i) });
    await expect(enqueueRaw("costly", list(10))).resolves.toBeDefined();
    const before = await totals();
    const e = await expectRefused(enqueueRaw("costly", list(400)), "task.payload", RULE_EVAL_COST_MAX);
    expect(e.message).toContain("costs more than");
    expect(await totals()).toEqual(before);
    const res = await sdk.taskRpc.enqueueBatch({ tasks: [list(10), list(400), list(10)].map((text) => ({ type: "costly", queue: "cel-bounds", payload: new TextEncoder().encode(text) })) });
    expect(res.items.map((i) => i.outcome.case)).toEqual(["result", "error", "result"]);
    expect(res.items[1]!.outcome.value).toMatchObject({ code: 3, field: "tasks[1].payload" });
  });

  it(`a computed key is at most ${RULE_KEY_MAX_CHARS} characters`, async () => {
    await setRule("keyed", "input.k");
    await expect(enqueueRaw("keyed", JSON.stringify({ k: "k".repeat(RULE_KEY_MAX_CHARS) }))).resolves.toBeDefined();
    await expectRefused(enqueueRaw("keyed", JSON.stringify({ k: "k".repeat(RULE_KEY_MAX_CHARS + 1) })), "task.payload", RULE_KEY_MAX_CHARS);
  });
});
