/**
 * Every value a request carries is bounded (src/base/limits.ts): beyond a bound the
 * node answers INVALID_ARGUMENT naming the field and the maximum, stores nothing, and
 * the queue keeps working. Values at the bounds work end to end (enqueue, lease,
 * settle), so no derived instant can overflow. Error messages stay short whatever the
 * caller sent, and bytes that do not decode are the caller's error, not INTERNAL.
 */
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, ConveyorError, Mux, json, newTask } from "../../src/index.js";
import {
  DURATION_MAX_MS, ERROR_MESSAGE_MAX_BYTES, INSTANT_MAX_MS, RESULT_MAX_BYTES, STATUS_MESSAGE_MAX_BYTES,
} from "../../src/base/limits.js";
import { fromServiceError } from "../../src/rpc/status.js";
import { EnqueueRequestSchema } from "../../src/gen/conveyor/v1/task_service_pb.js";
import type { TaskSpec } from "../../src/gen/conveyor/v1/task_pb.js";
import { LimitStrategy } from "../../src/gen/conveyor/v1/task_pb.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { TaskSpecSchema } from "../../src/gen/conveyor/v1/task_pb.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, deferred, rejection, runCli } from "../support/sdk.js";

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

const INT64_MAX = 2n ** 63n - 1n;
const DURATION_MAX = BigInt(DURATION_MAX_MS);
const INSTANT_MAX = BigInt(INSTANT_MAX_MS);

/** Expects INVALID_ARGUMENT naming `field`, with a message matching `message`. */
async function refused(p: Promise<unknown>, field: string, message: RegExp): Promise<ConveyorError> {
  const err = await rejection(p);
  expect(err, err.message).toMatchObject({ code: "INVALID_ARGUMENT", field });
  expect(err.message).toMatch(message);
  return err;
}

async function totalTasks(): Promise<number> {
  const res = await sdk.admin.listQueues({});
  return res.queues.reduce((sum, q) => sum + Object.values(q.counts ?? {}).reduce<number>((s, v) => s + (typeof v === "bigint" ? Number(v) : 0), 0), 0);
}

/** A valid task on `queue` still leases and completes: the queue was not hurt. */
async function queueStillWorks(queue: string): Promise<void> {
  const { result } = await sdk.taskRpc.enqueue({ task: { type: "t", queue } });
  const deliveries = await sdk.leaseNow(queue);
  expect(deliveries.map((d) => d.tasks[0]?.id)).toContain(result!.id);
  await sdk.workerRpc.settle({
    workerId: "w", settlements: deliveries.map((d) => ({ queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome: Outcome.SUCCESS })),
  });
  expect((await sdk.client.getTask(result!.id)).state).toBe("completed");
}

type Spec = MessageInitShape<typeof TaskSpecSchema>;

describe("instants and durations", () => {
  const queue = "bounds-time";
  const cases: Array<[string, Spec, string, RegExp]> = [
    ["a timeout of 106751991000 days", { timeoutMs: 106_751_991_000n * 86_400_000n }, "task.timeout_ms", /at most 3155760000000 ms \(100 years\)/],
    ["a retention just below INT64_MAX", { retentionMs: INT64_MAX - 1n }, "task.retention_ms", /at most 3155760000000 ms/],
    ["process_at_ms of INT64_MAX", { processAtMs: INT64_MAX }, "task.process_at_ms", /at most 253402300799999 \(9999-12-31T23:59:59\.999Z\)/],
    ["a negative process_at_ms", { processAtMs: -1n }, "task.process_at_ms", /must not be negative/],
    ["process_in_ms past 100 years", { processInMs: DURATION_MAX + 1n }, "task.process_in_ms", /at most 3155760000000 ms/],
    ["deadline_at_ms after year 9999", { deadlineAtMs: INSTANT_MAX + 1n }, "task.deadline_at_ms", /at most 253402300799999/],
    ["expires_at_ms of INT64_MAX", { expiresAtMs: INT64_MAX }, "task.expires_at_ms", /at most 253402300799999/],
    ["expires_in_ms of INT64_MAX", { expiresInMs: INT64_MAX }, "task.expires_in_ms", /at most 3155760000000 ms/],
    ["a unique TTL of INT64_MAX", { uniqueKey: "u", uniqueTtlMs: INT64_MAX }, "task.unique_ttl_ms", /at most 3155760000000 ms/],
    ["a backoff base of INT64_MAX", { backoffBaseMs: INT64_MAX }, "task.backoff_base_ms", /at most 3155760000000 ms/],
    ["a backoff max of INT64_MAX", { backoffMaxMs: INT64_MAX }, "task.backoff_max_ms", /at most 3155760000000 ms/],
  ];
  for (const [name, spec, field, message] of cases) {
    it(`${name} is INVALID_ARGUMENT naming ${field} and its maximum; nothing is stored`, async () => {
      const before = await totalTasks();
      await refused(sdk.taskRpc.enqueue({ task: { type: "t", queue, ...spec } }), field, message);
      expect(await totalTasks()).toBe(before);
    });
  }

  it("the CLI's --timeout 106751991000d is refused the same way", async () => {
    const run = await runCli(node, "enqueue", "--type", "t", "--queue", queue, "--timeout", "106751991000d").then(
      () => { throw new Error("the CLI accepted it"); },
      (e: { code: number; stderr: string }) => e,
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/task\.timeout_ms: must be at most 3155760000000 ms \(100 years\)/);
  });

  it("values at the bounds are accepted, lease, settle and retry without overflow", async () => {
    const before = await totalTasks();
    const atBounds: Spec = {
      type: "t", queue, timeoutMs: DURATION_MAX, retentionMs: DURATION_MAX, deadlineAtMs: INSTANT_MAX,
      expiresAtMs: INSTANT_MAX, uniqueKey: "at-bounds", uniqueTtlMs: DURATION_MAX, backoffBaseMs: DURATION_MAX, backoffMaxMs: DURATION_MAX,
    };
    const { result: first } = await sdk.taskRpc.enqueue({ task: atBounds });
    const { result: second } = await sdk.taskRpc.enqueue({ task: { ...atBounds, uniqueKey: "at-bounds-2" } });
    expect(await totalTasks()).toBe(before + 2);
    const deliveries = await sdk.leaseNow(queue);
    expect(deliveries.map((d) => d.tasks[0]!.id).sort()).toEqual([first!.id, second!.id].sort());
    const [a, b] = deliveries.map((d) => ({ queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id }));
    const res = await sdk.workerRpc.settle({
      workerId: "w", settlements: [{ ...a!, outcome: Outcome.SUCCESS }, { ...b!, outcome: Outcome.RETRY, error: "again" }],
    });
    expect(res.results.map((r) => r.error)).toEqual([undefined, undefined]);
    const done = await sdk.client.getTask(a!.taskId);
    expect(done.state).toBe("completed");
    const retried = await sdk.client.getTask(b!.taskId);
    expect(retried.state).toBe("retry");
    // A scheduled task at the latest instant is stored and listed like any other.
    const { result: late } = await sdk.taskRpc.enqueue({ task: { type: "t", queue, processAtMs: INSTANT_MAX } });
    expect((await sdk.client.getTask(late!.id)).state).toBe("scheduled");
    await queueStillWorks(queue);
    // Far-future timers are another finding (clamped timers); do not leave them armed.
    for (const id of [late!.id, b!.taskId]) await sdk.admin.deleteTask({ id });
  });

  it("one out-of-range value in a batch fails alone; its neighbours are enqueued", async () => {
    const tasks: Spec[] = Array.from({ length: 20 }, () => ({ type: "t", queue: "bounds-batch" }));
    tasks.splice(7, 0, { type: "t", queue: "bounds-batch", processAtMs: INT64_MAX });
    const res = await sdk.taskRpc.enqueueBatch({ tasks });
    const errors = res.items.filter((i) => i.outcome.case === "error");
    expect(errors).toHaveLength(1);
    expect(res.items[7]!.outcome).toMatchObject({ case: "error", value: { code: 3, field: "tasks[7].process_at_ms" } });
    expect((await sdk.counts("bounds-batch")).pending).toBe(20);
  });
});

describe("operator settings", () => {
  it("a group max delay or grace of INT64_MAX, or a max size over 1000, is refused and not stored", async () => {
    const base = { queue: "bounds-groups", group: "g", maxSize: 10, maxDelayMs: 60_000n, graceMs: 5_000n };
    await refused(sdk.admin.setGroupConfig({ config: { ...base, maxDelayMs: INT64_MAX } }), "config.max_delay_ms", /at most 3155760000000 ms/);
    await refused(sdk.admin.setGroupConfig({ config: { ...base, graceMs: INT64_MAX } }), "config.grace_ms", /at most 3155760000000 ms/);
    await refused(sdk.admin.setGroupConfig({ config: { ...base, maxSize: 1001 } }), "config.max_size", /at most 1000/);
    expect((await sdk.admin.listGroupConfigs({ queue: "bounds-groups" })).configs).toEqual([]);
    const ok = await sdk.admin.setGroupConfig({ config: { ...base, maxDelayMs: DURATION_MAX, graceMs: DURATION_MAX } });
    expect(ok.config?.maxDelayMs).toBe(DURATION_MAX);
  });

  it("a rate of 1e308, Infinity, NaN or 1e-9 per second, or a burst over 1e6, is refused and not stored", async () => {
    const queue = "bounds-rate";
    await refused(sdk.admin.setQueueRateLimit({ queue, ratePerSec: 1e308 }), "rate_per_sec", /at most 1000000/);
    await refused(sdk.admin.setQueueRateLimit({ queue, ratePerSec: Infinity }), "rate_per_sec", /at most 1000000/);
    await refused(sdk.admin.setQueueRateLimit({ queue, ratePerSec: NaN }), "rate_per_sec", /greater than 0/);
    await refused(sdk.admin.setQueueRateLimit({ queue, ratePerSec: 1e-9 }), "rate_per_sec", /at least 0\.000001/);
    await refused(sdk.admin.setQueueRateLimit({ queue, ratePerSec: 5, burst: 1_000_001 }), "burst", /at most 1000000/);
    expect((await sdk.admin.listRateLimits({})).limits.filter((l) => l.queue === queue)).toEqual([]);
    await queueStillWorks(queue);
  });

  it("a page token past a safe integer is INVALID_ARGUMENT naming page_token", async () => {
    await refused(sdk.admin.listTasks({ queue: "bounds-time", pageToken: "99999999999999999999" }), "page_token", /not a token from a previous page/);
    await refused(sdk.admin.listTasks({ queue: "bounds-time", pageToken: "9".repeat(5000) }), "page_token", /not a token/);
  });
});

describe("string lengths", () => {
  const queue = "bounds-strings";
  const long = (n: number) => "x".repeat(n);
  const cases: Array<[string, Spec, string, RegExp]> = [
    ["a 257-character type", { type: long(257) }, "task.type", /257 characters; the limit is 256/],
    ["a 129-character queue", { queue: long(129) }, "task.queue", /129 characters; the limit is 128/],
    ["a 129-character task id", { taskId: long(129) }, "task.task_id", /the limit is 128/],
    ["a 257-character unique key", { uniqueKey: long(257) }, "task.unique_key", /the limit is 256/],
    ["a 257-character concurrency key", { concurrencyKey: long(257) }, "task.concurrency_key", /the limit is 256/],
    ["a 257-character group", { group: long(257) }, "task.group", /the limit is 256/],
    // (A request over 4 MiB is refused whole, RESOURCE_EXHAUSTED: request-bounds.test.ts.)
    ["a 1 MB content type", { contentType: long(1_000_000) }, "task.content_type", /1000000 characters; the limit is 256/],
    ["65 metadata entries", { metadata: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, "v"])) }, "task.metadata", /65 entries; the limit is 64/],
    ["a 257-byte metadata key", { metadata: { [long(257)]: "v" } }, "task.metadata", /is 257 bytes; the limit is 256/],
    ["a 4097-byte metadata value", { metadata: { k: long(4097) } }, "task.metadata", /the value of "k" is 4097 bytes; the limit is 4096/],
    ["20 KB of metadata", { metadata: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`k${i}`, long(4000)])) }, "task.metadata", /the limit is 16384 \(16 KiB\)/],
    ["3 MB of metadata", { metadata: Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`k${i}`, long(1_000_000)])) }, "task.metadata", /the limit is 4096/],
  ];
  for (const [name, spec, field, message] of cases) {
    it(`${name} is INVALID_ARGUMENT naming ${field}; nothing is stored`, async () => {
      const before = await totalTasks();
      const err = await refused(sdk.taskRpc.enqueue({ task: { type: "t", queue, ...spec } }), field, message);
      expect(err.message.length).toBeLessThan(300);
      expect(await totalTasks()).toBe(before);
    });
  }

  it("a task id of 70,000 characters answers promptly and the connection keeps working", async () => {
    const client = new Client({ address: node.grpcAddress, timeoutMs: 10_000 });
    try {
      const started = Date.now();
      const err = await refused(client.getTask("i".repeat(70_000)), "id", /70000 characters; the limit is 128/);
      expect(err.message.length).toBeLessThan(100);
      expect(Date.now() - started).toBeLessThan(5_000);
      await refused(client.cancelTask("i".repeat(70_000)), "id", /the limit is 128/);
      const { id } = await client.enqueue(newTask("t", json({})), { queue });
      expect((await client.getTask(id)).id).toBe(id);
    } finally {
      client.close();
    }
    await refused(sdk.admin.getTask({ id: "i".repeat(70_000) }), "id", /the limit is 128/);
    await refused(sdk.admin.cancelTask({ id: "i".repeat(70_000) }), "id", /the limit is 128/);
  });

  it("a not-found id is quoted as a short prefix", async () => {
    const err = await rejection(sdk.client.getTask("n".repeat(128)));
    expect(err).toMatchObject({ code: "NOT_FOUND", reason: "TASK_NOT_FOUND" });
    expect(err.message).toBe(`task "${"n".repeat(64)}"… (128 characters) not found`);
  });

  it("worker calls bound worker ids, lease ids, task ids and batch types", async () => {
    const q = [{ queue, weight: 1 }];
    await refused(sdk.workerRpc.lease({ workerId: long(257), queues: q, maxDeliveries: 1, waitMs: 0 }), "worker_id", /the limit is 256/);
    await refused(sdk.workerRpc.lease({ workerId: "w", queues: q, maxDeliveries: 1, waitMs: 0, batchTypes: [long(257)] }), "batch_types[0]", /the limit is 256/);
    await refused(sdk.workerRpc.heartbeat({ workerId: "w", leases: [{ queue, leaseId: long(129) }] }), "leases[0].lease_id", /the limit is 128/);
    await refused(sdk.workerRpc.settle({ workerId: "w", settlements: [{ queue, leaseId: long(129), taskId: "t", outcome: Outcome.SUCCESS }] }),
      "settlements[0].lease_id", /the limit is 128/);
    await refused(sdk.workerRpc.settle({ workerId: "w", settlements: [{ queue, leaseId: "l", taskId: long(129), outcome: Outcome.SUCCESS }] }),
      "settlements[0].task_id", /the limit is 128/);
    await refused(sdk.workerRpc.registerTaskTypes({ workerId: "w", types: [{ type: long(257) }] }), "types[0].type", /the limit is 256/);
    await queueStillWorks(queue);
  });

  it("concurrency rules bound names and expressions", async () => {
    const rule = { expression: "input.k", maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN };
    await refused(sdk.admin.setStrategies({ type: "bounded", rules: [{ ...rule, expression: `"${long(5000)}"` }] }), "rules[0].expression", /the limit is 512/);
    await refused(sdk.admin.setStrategies({ type: "bounded", rules: [{ ...rule, name: long(129) }] }), "rules[0].name", /the limit is 128/);
    await refused(sdk.admin.setStrategies({ type: long(257), rules: [rule] }), "type", /the limit is 256/);
    expect((await sdk.admin.listStrategies({})).types.map((t) => t.type)).not.toContain("bounded");
  });
});

describe("results and error messages over their limit", () => {
  it("are kept truncated with a marker, and the task still settles", async () => {
    const queue = "bounds-settle";
    const ids = await Promise.all([1, 2].map(async () => (await sdk.taskRpc.enqueue({ task: { type: "t", queue, maxRetry: 5 } })).result!.id));
    const deliveries = await sdk.leaseNow(queue);
    const byTask = new Map(deliveries.map((d) => [d.tasks[0]!.id, d.leaseId]));
    const result = new Uint8Array(3 * 1024 * 1024).fill(0x61);
    const error = "e".repeat(200_000);
    const res = await sdk.workerRpc.settle({
      workerId: "w", settlements: [
        { queue, leaseId: byTask.get(ids[0]!)!, taskId: ids[0]!, outcome: Outcome.SUCCESS, result },
        { queue, leaseId: byTask.get(ids[1]!)!, taskId: ids[1]!, outcome: Outcome.RETRY, error },
      ],
    });
    expect(res.results.map((r) => r.error)).toEqual([undefined, undefined]);
    const completed = await sdk.admin.getTask({ id: ids[0]! });
    expect(completed.task?.state).toBe(6 /* COMPLETED */);
    const stored = completed.task!.result;
    expect(stored.byteLength).toBeLessThanOrEqual(RESULT_MAX_BYTES);
    expect(new TextDecoder().decode(stored.subarray(stored.byteLength - 30))).toMatch(/…\[truncated 2(\.0)? MiB\]$/);
    const retried = await sdk.client.getTask(ids[1]!);
    expect(retried.state).toBe("retry");
    expect(Buffer.byteLength(retried.lastError)).toBeLessThanOrEqual(ERROR_MESSAGE_MAX_BYTES);
    expect(retried.lastError).toMatch(/^e+…\[truncated 131\.3 KiB\]$/);
  });

  it("through the SDK worker too: a huge result and a huge error message settle", async () => {
    const queue = "bounds-sdk";
    const done = deferred<string>();
    const mux = new Mux()
      .handle("big-result", async () => "r".repeat(5_000_000))
      .handle("big-error", async (task) => {
        done.resolve(task.id);
        throw new Error("m".repeat(500_000));
      });
    sdk.worker(mux, { queues: [queue], concurrency: 2 });
    const big = await sdk.client.enqueue(newTask("big-result", json({})), { queue });
    const failing = await sdk.client.enqueue(newTask("big-error", json({})), { queue, maxRetry: 0 });
    const completed = await sdk.waitForState(big.id, "completed");
    expect(completed.result.byteLength).toBeLessThanOrEqual(RESULT_MAX_BYTES);
    expect(new TextDecoder().decode(completed.result.subarray(completed.result.byteLength - 30))).toMatch(/…\[truncated \d+(\.\d)? MiB\]$/);
    expect(await done.promise).toBe(failing.id);
    const archived = await sdk.waitForState(failing.id, "archived");
    expect(archived.lastError).toMatch(/^m+…\[truncated \d+(\.\d)? KiB\]$/);
  });
});

describe("requests that do not decode", () => {
  /** Sends raw bytes as a request and returns the error (or undefined on success). */
  function sendRaw(path: string, bytes: Uint8Array): Promise<ConveyorError | undefined> {
    const client = new grpc.Client(node.grpcAddress, grpc.credentials.createInsecure());
    return new Promise((resolve) => {
      client.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, Buffer.from(bytes), (err) => {
        client.close();
        resolve(err ? fromServiceError(err) : undefined);
      });
    });
  }

  const enqueueBytes = (spec: MessageInitShape<typeof TaskSpecSchema>) =>
    toBinary(EnqueueRequestSchema, create(EnqueueRequestSchema, { task: spec as TaskSpec }));

  it("a string that is not UTF-8 is INVALID_ARGUMENT naming the field; nothing is stored", async () => {
    const before = await totalTasks();
    const bytes = enqueueBytes({ type: "TYPE", queue: "bounds-utf8" });
    bytes[Buffer.from(bytes).indexOf("TYPE")] = 0xff;
    const err = await sendRaw("/conveyor.v1.TaskService/Enqueue", bytes);
    expect(err).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "task.type" });
    expect(err!.message).toMatch(/task\.type: is not valid UTF-8/);

    const meta = enqueueBytes({ type: "t", queue: "bounds-utf8", metadata: { key: "VALUE" } });
    meta[Buffer.from(meta).indexOf("VALUE")] = 0xc3;
    expect(await sendRaw("/conveyor.v1.TaskService/Enqueue", meta)).toMatchObject({ code: "INVALID_ARGUMENT", field: "task.metadata" });
    expect(await totalTasks()).toBe(before);
    await queueStillWorks("bounds-utf8");
  });

  it("bytes that are no message at all are INVALID_ARGUMENT MALFORMED_REQUEST, on every service", async () => {
    const garbage = Uint8Array.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]);
    for (const path of ["/conveyor.v1.TaskService/Enqueue", "/conveyor.v1.AdminService/ListTasks", "/conveyor.v1.WorkerService/Settle"]) {
      expect(await sendRaw(path, garbage), path).toMatchObject({ code: "INVALID_ARGUMENT", reason: "MALFORMED_REQUEST" });
    }
  });

  it("the JSON API refuses a body that is not UTF-8 and strings JSON escapes cannot carry in UTF-8", async () => {
    const post = (body: Buffer | string) => fetch(`http://${node.httpAddress}/api/conveyor.v1.TaskService/Enqueue`, {
      method: "POST", headers: { "content-type": "application/json" }, body,
    });
    const notUtf8 = Buffer.concat([Buffer.from('{"task":{"type":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}}')]);
    const res = await post(notUtf8);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: "INVALID_ARGUMENT", message: "request body is not valid UTF-8" });
    const lone = await post('{"task":{"type":"t","queue":"bounds-json","metadata":{"k":"\\ud800"}}}');
    expect(lone.status).toBe(400);
    const body = await lone.json() as { code: string; message: string };
    expect(body.code).toBe("INVALID_ARGUMENT");
    expect(body.message).toMatch(/conveyor\.v1\.TaskSpec\.metadata.*invalid UTF8/);
    expect((await sdk.counts("bounds-json")).pending).toBe(0);
  });

  it("an error message never exceeds the status limit", async () => {
    // The longest message a refusal can produce still fits (it quotes only prefixes).
    const err = await rejection(sdk.taskRpc.enqueue({ task: { type: "t", queue: `bad name ${"q".repeat(100)}` } }));
    expect(Buffer.byteLength(err.message)).toBeLessThanOrEqual(STATUS_MESSAGE_MAX_BYTES);
  });
});

describe("RegisterTaskTypes", () => {
  const rule = (name: string) => ({ name, expression: "input.k", maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN });

  it("is all or nothing: types that chain shared rules in different orders store neither", async () => {
    const err = await refused(sdk.workerRpc.registerTaskTypes({
      workerId: "w", types: [{ type: "atomic-a", concurrency: [rule("x"), rule("y")] }, { type: "atomic-b", concurrency: [rule("y"), rule("x")] }],
    }), "types[0].concurrency", /chain shared rules in one order everywhere/);
    expect(err.message).toMatch(/"atomic-a".*"atomic-b"/);
    const stored = (await sdk.admin.listStrategies({})).types.map((t) => t.type);
    expect(stored).not.toContain("atomic-a");
    expect(stored).not.toContain("atomic-b");
  });

  it("accepts the same types in one order, and a later call may reorder them all at once", async () => {
    await sdk.workerRpc.registerTaskTypes({
      workerId: "w", types: [{ type: "atomic-c", concurrency: [rule("p"), rule("q")] }, { type: "atomic-d", concurrency: [rule("p"), rule("q")] }],
    });
    await sdk.workerRpc.registerTaskTypes({
      workerId: "w", types: [{ type: "atomic-c", concurrency: [rule("q"), rule("p")] }, { type: "atomic-d", concurrency: [rule("q"), rule("p")] }],
    });
    const types = (await sdk.admin.listStrategies({})).types.filter((t) => t.type === "atomic-c" || t.type === "atomic-d");
    expect(types.map((t) => t.rules.map((r) => r.name))).toEqual([["q", "p"], ["q", "p"]]);
  });
});
