/**
 * What one response costs the node to build and encode, in this process (no gRPC, no
 * SQLite): `npm run build && node dist/bench/encode.js [iterations]`.
 *
 * For each hot response (a Lease of 50 one-task deliveries, an EnqueueBatch of 1,000
 * results, an Enqueue, a GetTask with two attempts) it times, per message:
 * - `build`: what the handler does to turn domain records into its answer (convert.ts);
 * - `serialize`: what grpc-js calls on that answer (`responseSerialize` of
 *   service-definition.ts), i.e. the node's real path, whatever it is in this checkout;
 * - `create` and `toBinary`: the reflection path split in its two steps, on the same
 *   answer, for comparison.
 * Medians of several rounds, in µs per delivery / per item / per call.
 */
import { performance } from "node:perf_hooks";
import { create, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { toGrpcDefinition } from "../src/rpc/service-definition.js";
import { WorkerService, LeaseResponseSchema } from "../src/gen/conveyor/v1/worker_service_pb.js";
import {
  TaskService, EnqueueBatchResponseSchema, EnqueueResponseSchema, GetTaskResponseSchema,
} from "../src/gen/conveyor/v1/task_service_pb.js";
import type { TaskRecord } from "../src/grains/queue/task.js";
import type { AttemptRecord } from "../src/grains/queue/attempts.js";
import { attemptToWire, deliveryToWire, enqueueResultToWire, taskToWire } from "../src/server/convert.js";
import { toItemError } from "../src/rpc/status.js";
import { ConveyorError } from "../src/base/errors.js";

const iterations = Number(process.argv[2] ?? 2_000);
const ROUNDS = 7;
const NOW = 1_760_000_000_000;

/** An active task as a Lease hands it out: ~110-byte JSON payload, one metadata entry. */
function leasedTask(i: number): TaskRecord {
  return {
    id: `q7-${crypto.randomUUID()}`, queue: "bench", type: "bench:task",
    payload: Buffer.from(JSON.stringify({ n: i, user: "someone@example.com", body: "x".repeat(60) })),
    contentType: "application/json", metadata: { trace: "abc123" }, state: "active", priority: 4, seq: i,
    maxRetry: 25, retried: 0, createdAtMs: NOW, readyAtMs: NOW, timeoutMs: 30_000, deadlineAtMs: 0,
    expiresAtMs: 0, uniqueKey: "", uniqueUntilMs: 0, concurrencyKey: "", group: "", backoffBaseMs: 1_000,
    backoffMaxMs: 60_000, retentionMs: 86_400_000, lastError: "", lastFailedAtMs: 0, finishedAtMs: 0,
    result: new Uint8Array(), cancelReason: "", rules: [], leaseId: `l-${i}`, leaseExpiresAtMs: NOW + 30_000, attemptNumber: 1,
  };
}

const deliveries = Array.from({ length: 50 }, (_, i) => ({
  leaseId: `l-${i}`, queue: "bench", leaseExpiresAtMs: NOW + 30_000, deadlineAtMs: 0, batch: false, group: "",
  taskIds: [`t-${i}`], tasks: [leasedTask(i)],
}));
const finished: TaskRecord = { ...leasedTask(1), state: "completed", finishedAtMs: NOW + 20, result: Buffer.from('{"ok":true}'), leaseId: "" };
const attempts: AttemptRecord[] = [
  { number: 1, startedAtMs: NOW, endedAtMs: NOW + 5, workerId: "w-1", outcome: "failed", error: "boom", stack: "Error: boom\n    at handler (worker.mjs:3:11)" },
  { number: 2, startedAtMs: NOW + 10, endedAtMs: NOW + 20, workerId: "w-1", outcome: "succeeded", error: "", stack: "" },
];
const outcomes = Array.from({ length: 1_000 }, (_, i) => ({ id: `q7-${crypto.randomUUID()}`, state: "pending" as const, existed: i % 97 === 0 }));
const refused = new ConveyorError("ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT", "unique key taken", "tasks[3].unique_key");

interface Case { name: string; per: number; schema: DescMessage; serialize: (m: unknown) => Buffer; build: () => unknown }
const worker = toGrpcDefinition(WorkerService);
const tasks = toGrpcDefinition(TaskService);
const cases: Case[] = [
  {
    name: "Lease, per delivery (50 × 1 task)", per: deliveries.length, schema: LeaseResponseSchema,
    serialize: worker.lease!.responseSerialize,
    build: () => ({ deliveries: deliveries.map(deliveryToWire), leaseTtlMs: 30_000, heartbeatIntervalMs: 10_000, relocated: false }),
  },
  {
    name: "EnqueueBatch, per item (1,000)", per: outcomes.length, schema: EnqueueBatchResponseSchema,
    serialize: tasks.enqueueBatch!.responseSerialize,
    build: () => ({
      items: outcomes.map((o, i) => i % 250 === 3
        ? { outcome: { case: "error" as const, value: toItemError(refused) } }
        : { outcome: { case: "result" as const, value: enqueueResultToWire(o, "bench") } }),
    }),
  },
  {
    name: "Enqueue, per call", per: 1, schema: EnqueueResponseSchema, serialize: tasks.enqueue!.responseSerialize,
    build: () => ({ result: enqueueResultToWire(outcomes[0]!, "bench") }),
  },
  {
    name: "GetTask, per call (2 attempts)", per: 1, schema: GetTaskResponseSchema, serialize: tasks.getTask!.responseSerialize,
    build: () => ({ task: taskToWire(finished), attempts: attempts.map(attemptToWire) }),
  },
];

/** Median over ROUNDS of the µs per unit that `fn` takes, run `n` times per round. */
function time(n: number, per: number, fn: () => void): number {
  const samples: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = performance.now();
    for (let i = 0; i < n; i++) fn();
    samples.push(((performance.now() - start) * 1_000) / n / per);
  }
  return samples.sort((a, b) => a - b)[ROUNDS >> 1]!;
}

const fmt = (us: number) => us.toFixed(2).padStart(8);
console.log(`${"µs per unit".padEnd(36)}${"build".padStart(8)}${"serialize".padStart(10)}${"create".padStart(8)}${"toBinary".padStart(9)}${"bytes".padStart(8)}`);
for (const c of cases) {
  const n = Math.max(20, Math.round(iterations / c.per) * 10);
  const built = c.build();
  const created = create(c.schema, built as never);
  let sink = 0;
  const build = time(n, c.per, () => void c.build());
  const serialize = time(n, c.per, () => (sink += c.serialize(built).length));
  const createUs = time(n, c.per, () => void create(c.schema, c.build() as never)) - build;
  const toBinaryUs = time(n, c.per, () => (sink += toBinary(c.schema, created).length));
  const bytes = c.serialize(built).length / c.per;
  console.log(`${c.name.padEnd(36)}${fmt(build)}${fmt(serialize)}  ${fmt(createUs)}${fmt(toBinaryUs)}${bytes.toFixed(0).padStart(8)}`);
  if (sink < 0) console.log(sink);
}
