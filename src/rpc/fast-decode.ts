/**
 * Hand-written decoding of the messages decoded once per task (issue 15): on the node the
 * enqueue requests (EnqueueRequest, EnqueueBatchRequest: their TaskSpecs are the bulk of
 * what a node decodes) and the worker's Settle and Lease requests, in a worker the Lease
 * answer (LeaseResponse: its deliveries' Tasks); and the session frames those calls travel
 * in (SessionRequest on the node, SessionResponse in the SDK), once per call.
 * protobuf-es's reflection decoder cost ~16 µs a task in a node's profile and ~28 µs a
 * delivered task in a worker's (field lookup by number, `create()` of each message, a
 * reader call per varint); this reads the same bytes straight into the message objects
 * protobuf-es would build.
 *
 * It decodes only what it knows to be ordinary and gives up otherwise: an unknown field, a
 * field with an unexpected wire type, a TaskSpec given twice in an EnqueueRequest (which
 * protobuf merges), a string that is not UTF-8, or bytes that end early all return
 * `undefined`, and the caller decodes with protobuf-es instead, which then accepts,
 * merges, keeps unknown fields or refuses exactly as before. So behaviour cannot differ;
 * the property test (test/property/fast-decode.property.test.ts) checks that what this
 * returns equals protobuf-es's message.
 */
import { fromBinary, type DescMessage } from "@bufbuild/protobuf";
import type { EnqueueBatchRequest, EnqueueRequest } from "../gen/conveyor/v1/task_service_pb.js";
import type { Task, TaskSpec, TaskState } from "../gen/conveyor/v1/task_pb.js";
import type { SessionRequest, SessionResponse } from "../gen/conveyor/v1/session_service_pb.js";
import type {
  Delivery, LeaseRequest, LeaseResponse, Outcome, QueueRoute, QueueWeight, SettleRequest, Settlement,
} from "../gen/conveyor/v1/worker_service_pb.js";

const VARINT = 0;
const LENGTH_DELIMITED = 2;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Thrown inside the decoder for anything it does not handle; never escapes it. */
class GiveUp extends Error {}
const GIVE_UP = new GiveUp();

class Reader {
  pos: number;
  constructor(readonly buf: Uint8Array, start: number, readonly end: number) {
    this.pos = start;
  }

  /** A varint of up to 32 bits of value (tags, lengths, uint32/int32 fields: the low 32 bits). */
  uint32(): number {
    const { buf } = this;
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= this.end) throw GIVE_UP;
      const b = buf[this.pos++]!;
      result |= (b & 0x7f) << shift;
      if (b < 0x80) return result >>> 0;
    }
    // The 32 bits are read; a longer varint (a negative int32 is 10 bytes) carries only sign bits.
    for (let i = 0; i < 5; i++) {
      if (this.pos >= this.end) throw GIVE_UP;
      if (buf[this.pos++]! < 0x80) return result >>> 0;
    }
    throw GIVE_UP;
  }

  /** An int64 varint as protobuf-es gives it (a bigint). */
  int64(): bigint {
    const { buf } = this;
    const start = this.pos;
    // Values under 2^49 (7 bytes) are exact as a double: the common case (milliseconds).
    let value = 0;
    for (let i = 0, scale = 1; i < 7; i++, scale *= 128) {
      if (this.pos >= this.end) throw GIVE_UP;
      const b = buf[this.pos++]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return BigInt(value);
    }
    this.pos = start;
    let big = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= this.end) throw GIVE_UP;
      const b = buf[this.pos++]!;
      big |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return BigInt.asIntN(64, big);
    }
    throw GIVE_UP;
  }

  /** A uint64 varint as protobuf-es gives it (a bigint). */
  uint64(): bigint {
    return BigInt.asUintN(64, this.int64());
  }

  /** The bounds of a length-delimited field's contents. */
  delimited(): number {
    const len = this.uint32();
    const start = this.pos;
    if (len > this.end - start) throw GIVE_UP;
    this.pos = start + len;
    return start;
  }

  bytes(): Uint8Array {
    const start = this.delimited();
    return this.buf.subarray(start, this.pos);
  }

  string(): string {
    const start = this.delimited();
    const { buf, pos } = this;
    // Short ASCII (names, keys, ids) without a decoder call.
    if (pos - start <= 64) {
      let ascii = true;
      for (let i = start; i < pos; i++) if (buf[i]! >= 0x80) { ascii = false; break; }
      if (ascii) return String.fromCharCode.apply(null, buf.subarray(start, pos) as unknown as number[]);
    }
    try {
      return utf8.decode(buf.subarray(start, pos));
    } catch {
      throw GIVE_UP; // not UTF-8: protobuf-es refuses it and says why
    }
  }
}

/** The end of a length-delimited field whose tag was just read, checked against the bytes left. */
function messageEnd(r: Reader, wire: number): number {
  if (wire !== LENGTH_DELIMITED) throw GIVE_UP;
  const len = r.uint32();
  if (len > r.end - r.pos) throw GIVE_UP;
  return r.pos + len;
}

/** Runs `read` over the whole of `bytes`: its message, or undefined where it gave up. */
function wholeMessage<T>(bytes: Uint8Array, read: (r: Reader) => T): T | undefined {
  try {
    return read(new Reader(bytes, 0, bytes.length));
  } catch (error) {
    if (error === GIVE_UP) return undefined;
    throw error;
  }
}

function taskSpec(r: Reader, end: number): TaskSpec {
  const spec: TaskSpec = {
    $typeName: "conveyor.v1.TaskSpec", type: "", payload: new Uint8Array(0), contentType: "", metadata: {}, queue: "",
    timeoutMs: 0n, deadlineAtMs: 0n, processAtMs: 0n, processInMs: 0n, uniqueKey: "", uniqueTtlMs: 0n, taskId: "",
    expiresInMs: 0n, expiresAtMs: 0n, concurrencyKey: "", group: "", backoffBaseMs: 0n, backoffMaxMs: 0n,
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const no = tag >>> 3;
    const wire = tag & 7;
    if (no === 4) {
      if (wire !== LENGTH_DELIMITED) throw GIVE_UP;
      const start = r.delimited();
      mapEntry(new Reader(r.buf, start, r.pos), spec.metadata);
      continue;
    }
    const stringOrBytes = no <= 3 || no === 5 || no === 12 || no === 14 || no === 18 || no === 19;
    if (wire !== (stringOrBytes ? LENGTH_DELIMITED : VARINT) || no < 1 || no > 21) throw GIVE_UP;
    switch (no) {
      case 1: spec.type = r.string(); break;
      case 2: spec.payload = r.bytes(); break;
      case 3: spec.contentType = r.string(); break;
      case 5: spec.queue = r.string(); break;
      case 6: spec.priority = r.uint32(); break;
      case 7: spec.maxRetry = r.uint32() | 0; break;
      case 8: spec.timeoutMs = r.int64(); break;
      case 9: spec.deadlineAtMs = r.int64(); break;
      case 10: spec.processAtMs = r.int64(); break;
      case 11: spec.processInMs = r.int64(); break;
      case 12: spec.uniqueKey = r.string(); break;
      case 13: spec.uniqueTtlMs = r.int64(); break;
      case 14: spec.taskId = r.string(); break;
      case 15: spec.retentionMs = r.int64(); break;
      case 16: spec.expiresInMs = r.int64(); break;
      case 17: spec.expiresAtMs = r.int64(); break;
      case 18: spec.concurrencyKey = r.string(); break;
      case 19: spec.group = r.string(); break;
      case 20: spec.backoffBaseMs = r.int64(); break;
      case 21: spec.backoffMaxMs = r.int64(); break;
    }
    if (r.pos > end) throw GIVE_UP;
  }
  if (r.pos !== end) throw GIVE_UP;
  return spec;
}

/** One `metadata` entry (key 1, value 2; either may be missing: ""). A key given again takes the later value. */
function mapEntry(r: Reader, into: Record<string, string>): void {
  let key = "";
  let value = "";
  while (r.pos < r.end) {
    const tag = r.uint32();
    if ((tag & 7) !== LENGTH_DELIMITED) throw GIVE_UP;
    if (tag >>> 3 === 1) key = r.string();
    else if (tag >>> 3 === 2) value = r.string();
    else throw GIVE_UP;
  }
  into[key] = value;
}

/** The message's TaskSpecs (field 1, length-delimited); `once`: at most one (EnqueueRequest's singular field). */
function taskSpecs(bytes: Uint8Array, once: boolean): TaskSpec[] | undefined {
  return wholeMessage(bytes, (r) => {
    const specs: TaskSpec[] = [];
    while (r.pos < r.end) {
      const tag = r.uint32();
      if (tag !== ((1 << 3) | LENGTH_DELIMITED) || (once && specs.length > 0)) throw GIVE_UP;
      specs.push(taskSpec(r, messageEnd(r, LENGTH_DELIMITED)));
    }
    return specs;
  });
}

export function decodeEnqueueBatchRequest(bytes: Uint8Array): EnqueueBatchRequest | undefined {
  const tasks = taskSpecs(bytes, false);
  return tasks && { $typeName: "conveyor.v1.EnqueueBatchRequest", tasks };
}

export function decodeEnqueueRequest(bytes: Uint8Array): EnqueueRequest | undefined {
  const tasks = taskSpecs(bytes, true);
  if (!tasks) return undefined;
  return tasks.length === 0 ? { $typeName: "conveyor.v1.EnqueueRequest" } : { $typeName: "conveyor.v1.EnqueueRequest", task: tasks[0]! };
}

/** Field numbers of Task's string and bytes fields (the rest but the map are varints). */
const TASK_DELIMITED = new Set([1, 2, 3, 4, 5, 16, 17, 18, 19, 22, 23, 24, 27]);

function task(r: Reader, end: number): Task {
  const t: Task = {
    $typeName: "conveyor.v1.Task", id: "", queue: "", type: "", payload: new Uint8Array(0), contentType: "", metadata: {},
    state: 0, priority: 0, maxRetry: 0, retried: 0, createdAtMs: 0n, readyAtMs: 0n, timeoutMs: 0n, deadlineAtMs: 0n,
    expiresAtMs: 0n, uniqueKey: "", concurrencyKey: "", group: "", lastError: "", lastFailedAtMs: 0n, finishedAtMs: 0n,
    result: new Uint8Array(0), cancelReason: "", leaseId: "", leaseExpiresAtMs: 0n, retentionMs: 0n, leaseWorkerId: "", leasedAtMs: 0n,
  };
  while (r.pos < end) {
    const tag = r.uint32();
    const no = tag >>> 3;
    const wire = tag & 7;
    if (no === 6) {
      if (wire !== LENGTH_DELIMITED) throw GIVE_UP;
      const start = r.delimited();
      mapEntry(new Reader(r.buf, start, r.pos), t.metadata);
      continue;
    }
    if (wire !== (TASK_DELIMITED.has(no) ? LENGTH_DELIMITED : VARINT) || no < 1 || no > 28) throw GIVE_UP;
    switch (no) {
      case 1: t.id = r.string(); break;
      case 2: t.queue = r.string(); break;
      case 3: t.type = r.string(); break;
      case 4: t.payload = r.bytes(); break;
      case 5: t.contentType = r.string(); break;
      case 7: t.state = (r.uint32() | 0) as TaskState; break;
      case 8: t.priority = r.uint32(); break;
      case 9: t.maxRetry = r.uint32() | 0; break;
      case 10: t.retried = r.uint32() | 0; break;
      case 11: t.createdAtMs = r.int64(); break;
      case 12: t.readyAtMs = r.int64(); break;
      case 13: t.timeoutMs = r.int64(); break;
      case 14: t.deadlineAtMs = r.int64(); break;
      case 15: t.expiresAtMs = r.int64(); break;
      case 16: t.uniqueKey = r.string(); break;
      case 17: t.concurrencyKey = r.string(); break;
      case 18: t.group = r.string(); break;
      case 19: t.lastError = r.string(); break;
      case 20: t.lastFailedAtMs = r.int64(); break;
      case 21: t.finishedAtMs = r.int64(); break;
      case 22: t.result = r.bytes(); break;
      case 23: t.cancelReason = r.string(); break;
      case 24: t.leaseId = r.string(); break;
      case 25: t.leaseExpiresAtMs = r.int64(); break;
      case 26: t.retentionMs = r.int64(); break;
      case 27: t.leaseWorkerId = r.string(); break;
      case 28: t.leasedAtMs = r.int64(); break;
    }
    if (r.pos > end) throw GIVE_UP;
  }
  if (r.pos !== end) throw GIVE_UP;
  return t;
}

function delivery(r: Reader, end: number): Delivery {
  const d: Delivery = { $typeName: "conveyor.v1.Delivery", leaseId: "", queue: "", leaseExpiresAtMs: 0n, deadlineAtMs: 0n, tasks: [], batch: false, group: "" };
  while (r.pos < end) {
    const tag = r.uint32();
    const no = tag >>> 3;
    const wire = tag & 7;
    if (no === 5) {
      d.tasks.push(task(r, messageEnd(r, wire)));
      continue;
    }
    if (wire !== (no === 1 || no === 2 || no === 7 ? LENGTH_DELIMITED : VARINT) || no < 1 || no > 7) throw GIVE_UP;
    switch (no) {
      case 1: d.leaseId = r.string(); break;
      case 2: d.queue = r.string(); break;
      case 3: d.leaseExpiresAtMs = r.int64(); break;
      case 4: d.deadlineAtMs = r.int64(); break;
      case 6: d.batch = r.uint32() !== 0; break;
      case 7: d.group = r.string(); break;
    }
    if (r.pos > end) throw GIVE_UP;
  }
  if (r.pos !== end) throw GIVE_UP;
  return d;
}

function queueRoute(r: Reader, end: number): QueueRoute {
  const route: QueueRoute = { $typeName: "conveyor.v1.QueueRoute", queue: "", nodeId: "", address: "" };
  while (r.pos < end) {
    const tag = r.uint32();
    if ((tag & 7) !== LENGTH_DELIMITED) throw GIVE_UP;
    switch (tag >>> 3) {
      case 1: route.queue = r.string(); break;
      case 2: route.nodeId = r.string(); break;
      case 3: route.address = r.string(); break;
      default: throw GIVE_UP;
    }
    if (r.pos > end) throw GIVE_UP;
  }
  if (r.pos !== end) throw GIVE_UP;
  return route;
}

export function decodeLeaseResponse(bytes: Uint8Array): LeaseResponse | undefined {
  return wholeMessage(bytes, (r) => {
    const res: LeaseResponse = { $typeName: "conveyor.v1.LeaseResponse", deliveries: [], leaseTtlMs: 0, heartbeatIntervalMs: 0, routes: [], relocated: false };
    while (r.pos < r.end) {
      const tag = r.uint32();
      const no = tag >>> 3;
      const wire = tag & 7;
      if (no === 1) res.deliveries.push(delivery(r, messageEnd(r, wire)));
      else if (no === 4) res.routes.push(queueRoute(r, messageEnd(r, wire)));
      else if (wire !== VARINT) throw GIVE_UP;
      else if (no === 2) res.leaseTtlMs = r.uint32();
      else if (no === 3) res.heartbeatIntervalMs = r.uint32();
      else if (no === 5) res.relocated = r.uint32() !== 0;
      else throw GIVE_UP;
    }
    return res;
  });
}

function settlement(r: Reader, end: number): Settlement {
  const st: Settlement = { $typeName: "conveyor.v1.Settlement", queue: "", leaseId: "", taskId: "", outcome: 0, result: new Uint8Array(0), error: "", stack: "" };
  while (r.pos < end) {
    const tag = r.uint32();
    const no = tag >>> 3;
    if ((tag & 7) !== (no === 4 ? VARINT : LENGTH_DELIMITED) || no < 1 || no > 7) throw GIVE_UP;
    switch (no) {
      case 1: st.queue = r.string(); break;
      case 2: st.leaseId = r.string(); break;
      case 3: st.taskId = r.string(); break;
      case 4: st.outcome = (r.uint32() | 0) as Outcome; break;
      case 5: st.result = r.bytes(); break;
      case 6: st.error = r.string(); break;
      case 7: st.stack = r.string(); break;
    }
    if (r.pos > end) throw GIVE_UP;
  }
  if (r.pos !== end) throw GIVE_UP;
  return st;
}

export function decodeSettleRequest(bytes: Uint8Array): SettleRequest | undefined {
  return wholeMessage(bytes, (r) => {
    const req: SettleRequest = { $typeName: "conveyor.v1.SettleRequest", workerId: "", settlements: [], workerDraining: false };
    while (r.pos < r.end) {
      const tag = r.uint32();
      const no = tag >>> 3;
      const wire = tag & 7;
      if (no === 2) req.settlements.push(settlement(r, messageEnd(r, wire)));
      else if (no === 1 && wire === LENGTH_DELIMITED) req.workerId = r.string();
      else if (no === 3 && wire === VARINT) req.workerDraining = r.uint32() !== 0;
      else throw GIVE_UP;
    }
    return req;
  });
}

function queueWeight(r: Reader, end: number): QueueWeight {
  const q: QueueWeight = { $typeName: "conveyor.v1.QueueWeight", queue: "", weight: 0 };
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag === ((1 << 3) | LENGTH_DELIMITED)) q.queue = r.string();
    else if (tag === ((2 << 3) | VARINT)) q.weight = r.uint32();
    else throw GIVE_UP;
    if (r.pos > end) throw GIVE_UP;
  }
  if (r.pos !== end) throw GIVE_UP;
  return q;
}

export function decodeLeaseRequest(bytes: Uint8Array): LeaseRequest | undefined {
  return wholeMessage(bytes, (r) => {
    const req: LeaseRequest = {
      $typeName: "conveyor.v1.LeaseRequest", workerId: "", queues: [], maxDeliveries: 0, waitMs: 0, batchTypes: [], types: [], host: "",
      concurrency: 0, pollOwners: false, standing: false,
    };
    while (r.pos < r.end) {
      const tag = r.uint32();
      const no = tag >>> 3;
      const wire = tag & 7;
      if (no === 2) {
        req.queues.push(queueWeight(r, messageEnd(r, wire)));
        continue;
      }
      const delimited = no === 1 || no === 5 || no === 6 || no === 7;
      if (wire !== (delimited ? LENGTH_DELIMITED : VARINT) || no < 1 || no > 10) throw GIVE_UP;
      switch (no) {
        case 1: req.workerId = r.string(); break;
        case 3: req.maxDeliveries = r.uint32(); break;
        case 4: req.waitMs = r.uint32(); break;
        case 5: req.batchTypes.push(r.string()); break;
        case 6: req.types.push(r.string()); break;
        case 7: req.host = r.string(); break;
        case 8: req.concurrency = r.uint32(); break;
        case 9: req.pollOwners = r.uint32() !== 0; break;
        case 10: req.standing = r.uint32() !== 0; break;
      }
    }
    return req;
  });
}

/** A session frame to the node: the call's id, method, request bytes (not copied), deadline. */
export function decodeSessionRequest(bytes: Uint8Array): SessionRequest | undefined {
  return wholeMessage(bytes, (r) => {
    const req: SessionRequest = { $typeName: "conveyor.v1.SessionRequest", callId: 0n, method: "", request: new Uint8Array(0), timeoutMs: 0, cancel: false, credits: 0 };
    while (r.pos < r.end) {
      const tag = r.uint32();
      if (tag === ((1 << 3) | VARINT)) req.callId = r.uint64();
      else if (tag === ((2 << 3) | LENGTH_DELIMITED)) req.method = r.string();
      else if (tag === ((3 << 3) | LENGTH_DELIMITED)) req.request = r.bytes();
      else if (tag === ((4 << 3) | VARINT)) req.timeoutMs = r.uint32();
      else if (tag === ((5 << 3) | VARINT)) req.cancel = r.uint32() !== 0;
      else if (tag === ((6 << 3) | VARINT)) req.credits = r.uint32();
      else throw GIVE_UP;
    }
    return req;
  });
}

/** A session frame from the node: the call's id and its answer or error bytes (not copied). */
export function decodeSessionResponse(bytes: Uint8Array): SessionResponse | undefined {
  return wholeMessage(bytes, (r) => {
    const res: SessionResponse = { $typeName: "conveyor.v1.SessionResponse", callId: 0n, result: { case: undefined }, more: false };
    while (r.pos < r.end) {
      const tag = r.uint32();
      // A oneof given twice keeps the last (as protobuf-es does).
      if (tag === ((1 << 3) | VARINT)) res.callId = r.uint64();
      else if (tag === ((2 << 3) | LENGTH_DELIMITED)) res.result = { case: "response", value: r.bytes() };
      else if (tag === ((3 << 3) | LENGTH_DELIMITED)) res.result = { case: "error", value: r.bytes() };
      else if (tag === ((4 << 3) | VARINT)) res.more = r.uint32() !== 0;
      else throw GIVE_UP;
    }
    return res;
  });
}

/**
 * The hand decoders by message type name: the node's request decoding (request-decode.ts)
 * and the SDK's answer decoding (service-definition.ts, session-client.ts) try them first.
 */
export const HAND_DECODED: ReadonlyMap<string, (bytes: Uint8Array) => unknown> = new Map<string, (bytes: Uint8Array) => unknown>([
  ["conveyor.v1.EnqueueBatchRequest", decodeEnqueueBatchRequest],
  ["conveyor.v1.EnqueueRequest", decodeEnqueueRequest],
  ["conveyor.v1.LeaseResponse", decodeLeaseResponse],
  ["conveyor.v1.SettleRequest", decodeSettleRequest],
  ["conveyor.v1.LeaseRequest", decodeLeaseRequest],
  ["conveyor.v1.SessionRequest", decodeSessionRequest],
  ["conveyor.v1.SessionResponse", decodeSessionResponse],
]);

/** `bytes` as a `schema` message: by hand when a hand decoder takes them, else through protobuf-es (which throws what it throws). */
export function decodeMessage(schema: DescMessage, bytes: Uint8Array): unknown {
  return HAND_DECODED.get(schema.typeName)?.(bytes) ?? fromBinary(schema, bytes);
}
