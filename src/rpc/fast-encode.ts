/**
 * Hand-written binary encoders for the responses on the node's hot paths (Lease, Settle,
 * Heartbeat, the enqueues, GetTask/WaitTask/CancelTask), and for the producer's enqueue
 * requests. protobuf-es's reflection path
 * costs ~11 µs to encode one delivered Task (`reflect()` per message, then a dispatch on
 * every field's kind), and `create()` before it deep-copies the handler's answer; these
 * write the handler's answer (an init-shape object, or a real message: the same property
 * names) straight into protobuf-es's own `BinaryWriter`. Every other message keeps the
 * reflection path (`fastEncoderFor` answers undefined).
 *
 * What keeps them honest (test/property/fast-encode.property.test.ts and
 * test/unit/fast-encode-fields.test.ts):
 * - for arbitrary messages built from the descriptors, the bytes decode to the same
 *   message as `toBinary(create(…))`'s;
 * - every message here names the fields it writes (`HAND_ENCODED`), and a test fails when
 *   that list differs from the descriptor's: a field added to the proto cannot be
 *   dropped silently. A field with implicit presence (proto3 without `optional`) is not
 *   written at its zero value, as in reflection; one with explicit presence is written
 *   whenever set, zero included, and is listed as `optional` (the test checks both).
 *
 * The SDK's enqueue requests (EnqueueRequest, EnqueueBatchRequest) and the worker's
 * Settle and Lease requests are encoded here too.
 *
 * Unknown fields a real message carries (an answer decoded from a newer peer and passed
 * on by the forwarder) are written back, as reflection does.
 */
import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { AttemptSchema, EnqueueResultSchema, ItemErrorSchema, TaskSchema, TaskSpecSchema } from "../gen/conveyor/v1/task_pb.js";
import {
  CancelTaskResponseSchema, EnqueueBatchItemSchema, EnqueueBatchRequestSchema, EnqueueBatchResponseSchema, EnqueueRequestSchema,
  EnqueueResponseSchema, EnqueueTxResponseSchema, GetTaskResponseSchema, WaitTaskResponseSchema,
} from "../gen/conveyor/v1/task_service_pb.js";
import {
  DeliverySchema, HeartbeatResponseSchema, LeaseRequestSchema, LeaseResponseSchema, LeaseStatusSchema, QueueRouteSchema, QueueWeightSchema,
  SettlementSchema, SettleRequestSchema, SettleResponseSchema, SettleResultSchema,
} from "../gen/conveyor/v1/worker_service_pb.js";

type Init<Desc extends DescMessage> = MessageInitShape<Desc>;
type Encode<T> = (w: BinaryWriter, m: T) => void;

const VARINT = WireType.Varint;
const LEN = WireType.LengthDelimited;

// Field writers. Each skips its zero value (implicit presence), as reflection does.
function str(w: BinaryWriter, no: number, v: string | undefined): void {
  if (v) w.uint32((no << 3) | LEN).string(v);
}
function bytes(w: BinaryWriter, no: number, v: Uint8Array | undefined): void {
  if (v && v.byteLength > 0) w.uint32((no << 3) | LEN).bytes(v);
}
function u32(w: BinaryWriter, no: number, v: number | undefined): void {
  if (v) w.uint32((no << 3) | VARINT).uint32(v);
}
/** int32 and enums (an enum is an int32 on the wire). */
function i32(w: BinaryWriter, no: number, v: number | undefined): void {
  if (v) w.uint32((no << 3) | VARINT).int32(v);
}
function i64(w: BinaryWriter, no: number, v: bigint | undefined): void {
  if (v) w.uint32((no << 3) | VARINT).int64(v);
}
function bool(w: BinaryWriter, no: number, v: boolean | undefined): void {
  if (v) w.uint32((no << 3) | VARINT).bool(true);
}
// Fields with explicit presence (`optional`): written whenever set, zero included.
function optU32(w: BinaryWriter, no: number, v: number | undefined): void {
  if (v !== undefined) w.uint32((no << 3) | VARINT).uint32(v);
}
function optI32(w: BinaryWriter, no: number, v: number | undefined): void {
  if (v !== undefined) w.uint32((no << 3) | VARINT).int32(v);
}
function optI64(w: BinaryWriter, no: number, v: bigint | undefined): void {
  if (v !== undefined) w.uint32((no << 3) | VARINT).int64(v);
}
/** A repeated string: every element, "" included. */
function strings(w: BinaryWriter, no: number, vs: readonly string[] | undefined): void {
  if (vs) for (const v of vs) w.uint32((no << 3) | LEN).string(v);
}
function message<T>(w: BinaryWriter, no: number, v: T | undefined | null, encode: Encode<T>): void {
  if (v == null) return;
  w.uint32((no << 3) | LEN).fork();
  encode(w, v);
  w.join();
}
function messages<T>(w: BinaryWriter, no: number, vs: readonly T[] | undefined, encode: Encode<T>): void {
  if (vs) for (const v of vs) message(w, no, v, encode);
}
/** map<string, string>: one entry message (key = 1, value = 2) per pair. */
function stringMap(w: BinaryWriter, no: number, m: Readonly<Record<string, string>> | undefined): void {
  if (!m) return;
  for (const key in m) {
    if (!Object.hasOwn(m, key)) continue;
    w.uint32((no << 3) | LEN).fork();
    str(w, 1, key);
    str(w, 2, m[key]);
    w.join();
  }
}
/** The unknown fields of a decoded message, written back (protobuf-es keeps them in `$unknown`). */
function unknown(w: BinaryWriter, m: object): void {
  const fields = (m as { $unknown?: ReadonlyArray<{ no: number; wireType: WireType; data: Uint8Array }> }).$unknown;
  if (fields) for (const f of fields) w.tag(f.no, f.wireType).raw(f.data);
}

/**
 * Each hand-encoded message, the fields its encoder writes (checked against the
 * descriptor) and the encoder, typed for the tests, which feed it arbitrary messages.
 */
export const HAND_ENCODED: Array<{ schema: DescMessage; fields: readonly string[]; optional: readonly string[]; encode: Encode<unknown> }> = [];

/** `optional`: the fields with explicit presence, which the encoder writes with the opt* writers (checked against the descriptor). */
function encoder<Desc extends DescMessage>(schema: Desc, fields: ReadonlyArray<keyof Init<Desc> & string>, encode: Encode<Init<Desc>>,
  optional: ReadonlyArray<keyof Init<Desc> & string> = []): Encode<Init<Desc>> {
  const body: Encode<Init<Desc>> = (w, m) => {
    encode(w, m);
    unknown(w, m);
  };
  HAND_ENCODED.push({ schema, fields, optional, encode: body as Encode<unknown> });
  return body;
}

const task = encoder(TaskSchema, [
  "id", "queue", "type", "payload", "contentType", "metadata", "state", "priority", "maxRetry", "retried", "createdAtMs",
  "readyAtMs", "timeoutMs", "deadlineAtMs", "expiresAtMs", "uniqueKey", "concurrencyKey", "group", "lastError",
  "lastFailedAtMs", "finishedAtMs", "result", "cancelReason", "leaseId", "leaseExpiresAtMs", "retentionMs",
  "leaseWorkerId", "leasedAtMs",
], (w, t) => {
  str(w, 1, t.id);
  str(w, 2, t.queue);
  str(w, 3, t.type);
  bytes(w, 4, t.payload);
  str(w, 5, t.contentType);
  stringMap(w, 6, t.metadata);
  i32(w, 7, t.state);
  u32(w, 8, t.priority);
  i32(w, 9, t.maxRetry);
  i32(w, 10, t.retried);
  i64(w, 11, t.createdAtMs);
  i64(w, 12, t.readyAtMs);
  i64(w, 13, t.timeoutMs);
  i64(w, 14, t.deadlineAtMs);
  i64(w, 15, t.expiresAtMs);
  str(w, 16, t.uniqueKey);
  str(w, 17, t.concurrencyKey);
  str(w, 18, t.group);
  str(w, 19, t.lastError);
  i64(w, 20, t.lastFailedAtMs);
  i64(w, 21, t.finishedAtMs);
  bytes(w, 22, t.result);
  str(w, 23, t.cancelReason);
  str(w, 24, t.leaseId);
  i64(w, 25, t.leaseExpiresAtMs);
  i64(w, 26, t.retentionMs);
  str(w, 27, t.leaseWorkerId);
  i64(w, 28, t.leasedAtMs);
});

const attempt = encoder(AttemptSchema, ["number", "startedAtMs", "endedAtMs", "workerId", "outcome", "error", "stack"], (w, a) => {
  u32(w, 1, a.number);
  i64(w, 2, a.startedAtMs);
  i64(w, 3, a.endedAtMs);
  str(w, 4, a.workerId);
  str(w, 5, a.outcome);
  str(w, 6, a.error);
  str(w, 7, a.stack);
});

const itemError = encoder(ItemErrorSchema, ["code", "reason", "message", "field", "details"], (w, e) => {
  i32(w, 1, e.code);
  str(w, 2, e.reason);
  str(w, 3, e.message);
  str(w, 4, e.field);
  stringMap(w, 5, e.details);
});

const enqueueResult = encoder(EnqueueResultSchema, ["id", "queue", "state", "existed"], (w, r) => {
  str(w, 1, r.id);
  str(w, 2, r.queue);
  i32(w, 3, r.state);
  bool(w, 4, r.existed);
});

const delivery = encoder(DeliverySchema, ["leaseId", "queue", "leaseExpiresAtMs", "deadlineAtMs", "tasks", "batch", "group"], (w, d) => {
  str(w, 1, d.leaseId);
  str(w, 2, d.queue);
  i64(w, 3, d.leaseExpiresAtMs);
  i64(w, 4, d.deadlineAtMs);
  messages(w, 5, d.tasks, task);
  bool(w, 6, d.batch);
  str(w, 7, d.group);
});

const queueRoute = encoder(QueueRouteSchema, ["queue", "nodeId", "address"], (w, r) => {
  str(w, 1, r.queue);
  str(w, 2, r.nodeId);
  str(w, 3, r.address);
});

const leaseResponse = encoder(LeaseResponseSchema, ["deliveries", "leaseTtlMs", "heartbeatIntervalMs", "routes", "relocated"], (w, r) => {
  messages(w, 1, r.deliveries, delivery);
  u32(w, 2, r.leaseTtlMs);
  u32(w, 3, r.heartbeatIntervalMs);
  messages(w, 4, r.routes, queueRoute);
  bool(w, 5, r.relocated);
});

const leaseStatus = encoder(LeaseStatusSchema, ["queue", "leaseId", "held", "cancelRequested", "cancelReason", "leaseExpiresAtMs"], (w, s) => {
  str(w, 1, s.queue);
  str(w, 2, s.leaseId);
  bool(w, 3, s.held);
  bool(w, 4, s.cancelRequested);
  str(w, 5, s.cancelReason);
  i64(w, 6, s.leaseExpiresAtMs);
});

const heartbeatResponse = encoder(HeartbeatResponseSchema, ["leases"], (w, r) => messages(w, 1, r.leases, leaseStatus));

const settleResult = encoder(SettleResultSchema, ["taskId", "error"], (w, r) => {
  str(w, 1, r.taskId);
  message(w, 2, r.error, itemError);
});

const settleResponse = encoder(SettleResponseSchema, ["results"], (w, r) => messages(w, 1, r.results, settleResult));

const enqueueResponse = encoder(EnqueueResponseSchema, ["result"], (w, r) => message(w, 1, r.result, enqueueResult));

/** `outcome` is a oneof: its fields are `result` (1) and `error` (2). */
const enqueueBatchItem = encoder(EnqueueBatchItemSchema, ["outcome"], (w, item) => {
  const o = item.outcome;
  if (o?.case === "result") message(w, 1, o.value, enqueueResult);
  else if (o?.case === "error") message(w, 2, o.value, itemError);
});

const enqueueBatchResponse = encoder(EnqueueBatchResponseSchema, ["items"], (w, r) => messages(w, 1, r.items, enqueueBatchItem));

const enqueueTxResponse = encoder(EnqueueTxResponseSchema, ["results"], (w, r) => messages(w, 1, r.results, enqueueResult));

const getTaskResponse = encoder(GetTaskResponseSchema, ["task", "attempts"], (w, r) => {
  message(w, 1, r.task, task);
  messages(w, 2, r.attempts, attempt);
});

const waitTaskResponse = encoder(WaitTaskResponseSchema, ["task", "finished"], (w, r) => {
  message(w, 1, r.task, task);
  bool(w, 2, r.finished);
});

const cancelTaskResponse = encoder(CancelTaskResponseSchema, ["task"], (w, r) => message(w, 1, r.task, task));

// The requests the SDK sends most (a producer's enqueues): building them through
// reflection cost the producer ~10 µs a task, on the path of every batch.
const taskSpec = encoder(TaskSpecSchema, [
  "type", "payload", "contentType", "metadata", "queue", "priority", "maxRetry", "timeoutMs", "deadlineAtMs", "processAtMs", "processInMs",
  "uniqueKey", "uniqueTtlMs", "taskId", "retentionMs", "expiresInMs", "expiresAtMs", "concurrencyKey", "group", "backoffBaseMs", "backoffMaxMs",
], (w, t) => {
  str(w, 1, t.type);
  bytes(w, 2, t.payload);
  str(w, 3, t.contentType);
  stringMap(w, 4, t.metadata);
  str(w, 5, t.queue);
  optU32(w, 6, t.priority);
  optI32(w, 7, t.maxRetry);
  i64(w, 8, t.timeoutMs);
  i64(w, 9, t.deadlineAtMs);
  i64(w, 10, t.processAtMs);
  i64(w, 11, t.processInMs);
  str(w, 12, t.uniqueKey);
  i64(w, 13, t.uniqueTtlMs);
  str(w, 14, t.taskId);
  optI64(w, 15, t.retentionMs);
  i64(w, 16, t.expiresInMs);
  i64(w, 17, t.expiresAtMs);
  str(w, 18, t.concurrencyKey);
  str(w, 19, t.group);
  i64(w, 20, t.backoffBaseMs);
  i64(w, 21, t.backoffMaxMs);
}, ["priority", "maxRetry", "retentionMs"]);

const enqueueRequest = encoder(EnqueueRequestSchema, ["task"], (w, r) => message(w, 1, r.task, taskSpec));
const enqueueBatchRequest = encoder(EnqueueBatchRequestSchema, ["tasks"], (w, r) => messages(w, 1, r.tasks, taskSpec));

// The worker's requests: a Settle per turn of finished handlers, a Lease per round.
const settlement = encoder(SettlementSchema, ["queue", "leaseId", "taskId", "outcome", "result", "error", "stack"], (w, s) => {
  str(w, 1, s.queue);
  str(w, 2, s.leaseId);
  str(w, 3, s.taskId);
  i32(w, 4, s.outcome);
  bytes(w, 5, s.result);
  str(w, 6, s.error);
  str(w, 7, s.stack);
});
const settleRequest = encoder(SettleRequestSchema, ["workerId", "settlements", "workerDraining"], (w, r) => {
  str(w, 1, r.workerId);
  messages(w, 2, r.settlements, settlement);
  bool(w, 3, r.workerDraining);
});
const queueWeight = encoder(QueueWeightSchema, ["queue", "weight"], (w, q) => {
  str(w, 1, q.queue);
  u32(w, 2, q.weight);
});
const leaseRequest = encoder(LeaseRequestSchema, [
  "workerId", "queues", "maxDeliveries", "waitMs", "batchTypes", "types", "host", "concurrency", "pollOwners", "standing",
], (w, r) => {
  str(w, 1, r.workerId);
  messages(w, 2, r.queues, queueWeight);
  u32(w, 3, r.maxDeliveries);
  u32(w, 4, r.waitMs);
  strings(w, 5, r.batchTypes);
  strings(w, 6, r.types);
  str(w, 7, r.host);
  u32(w, 8, r.concurrency);
  bool(w, 9, r.pollOwners);
  bool(w, 10, r.standing);
});

/** The messages grpc-js serializes whole through a hand encoder, by type name: the hot answers, and the enqueue, Settle and Lease requests. */
const RESPONSES: ReadonlyMap<string, Encode<never>> = new Map<string, Encode<never>>([
  [EnqueueRequestSchema.typeName, enqueueRequest],
  [EnqueueBatchRequestSchema.typeName, enqueueBatchRequest],
  [SettleRequestSchema.typeName, settleRequest],
  [LeaseRequestSchema.typeName, leaseRequest],
  [LeaseResponseSchema.typeName, leaseResponse],
  [HeartbeatResponseSchema.typeName, heartbeatResponse],
  [SettleResponseSchema.typeName, settleResponse],
  [EnqueueResponseSchema.typeName, enqueueResponse],
  [EnqueueBatchResponseSchema.typeName, enqueueBatchResponse],
  [EnqueueTxResponseSchema.typeName, enqueueTxResponse],
  [GetTaskResponseSchema.typeName, getTaskResponse],
  [WaitTaskResponseSchema.typeName, waitTaskResponse],
  [CancelTaskResponseSchema.typeName, cancelTaskResponse],
]);

/**
 * UTF-8 for the writer: Buffer.from is ~3× faster than TextEncoder on short strings
 * (0.12 vs 0.33 µs; a Task has up to 12), and it writes a lone surrogate as U+FFFD as
 * TextEncoder does (the property test's strings include them).
 */
const utf8 = (s: string): Uint8Array => Buffer.from(s, "utf8");

/** Encodes with `encode` into a fresh writer. */
export function encodeWith<T>(encode: Encode<T>, m: T): Uint8Array {
  const w = new BinaryWriter(utf8);
  encode(w, m);
  return w.finish();
}

/**
 * The hand encoder of a response type, or undefined (then the caller uses reflection).
 * It takes the init shape the handler returns, or a real message.
 */
export function fastEncoderFor(schema: DescMessage): ((m: unknown) => Uint8Array) | undefined {
  const encode = RESPONSES.get(schema.typeName) as Encode<unknown> | undefined;
  return encode && ((m) => encodeWith(encode, m));
}
