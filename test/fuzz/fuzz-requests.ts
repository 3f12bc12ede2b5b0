/**
 * Request generators for the RPC fuzz suite, derived from the generated descriptors: every
 * RPC of every service in src/gen, random bytes as its body, and typed requests whose
 * fields take boundary values (empty, huge, negative, INT64 extremes, NUL, invalid UTF-8,
 * deep JSON, long strings). Field names steer the values a little (queues, types, ids,
 * payloads, CEL expressions), so that requests meet each other (a type registered with
 * rules is also enqueued) and reach the code behind validation.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { ScalarType, create, toBinary, type DescField, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { REPO_ROOT } from "../support/node-process.js";

export interface FuzzMethod {
  service: string;
  name: string;
  /** The gRPC path, /package.Service/Method. */
  path: string;
  input: DescMessage;
  output: DescMessage;
}

/**
 * Services that are transports, not RPCs of their own: SessionService carries unary calls
 * of TaskService and WorkerService, which the fuzz suite also sends on a session.
 */
const TRANSPORTS = new Set(["conveyor.v1.SessionService"]);

/** Every unary RPC of every service generated in src/gen/conveyor (new ones are picked up). */
export async function allMethods(): Promise<FuzzMethod[]> {
  const dir = join(REPO_ROOT, "src/gen/conveyor/v1");
  const methods: FuzzMethod[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith("_service_pb.ts")).sort()) {
    const mod = (await import(join(dir, file))) as Record<string, unknown>;
    for (const value of Object.values(mod)) {
      if (typeof value !== "object" || value === null || (value as { kind?: string }).kind !== "service") continue;
      const service = value as DescService;
      if (TRANSPORTS.has(service.typeName)) continue;
      for (const m of service.methods as DescMethod[]) {
        if (m.methodKind !== "unary") throw new Error(`${service.typeName}/${m.name}: the fuzz suite sends unary calls only`);
        methods.push({ service: service.name, name: m.name, path: `/${service.typeName}/${m.name}`, input: m.input, output: m.output });
      }
    }
  }
  return methods;
}

/** One request to send: its bytes, a short description for failure reports, and the queues it names. */
export interface FuzzRequest {
  bytes: Uint8Array;
  describe: string;
  queues: string[];
}

/** Generated requests stay under this (the node's limit is 4 MiB: beyond it tests the transport, not the node). */
const REQUEST_BYTES_MAX = 6 * 1024 * 1024;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);
const DAY_MS = 86_400_000;

/**
 * Generation uses one "now" per suite, so that relative instants are meaningful. (The
 * valid stream's queues and types have names no generator here produces.)
 */
export interface FuzzContext {
  nowMs: number;
}

const longString = (n: number, c = "x") => c.repeat(n);
const deepJson = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

const COMMON_STRINGS = ["", "a", "\0", "a\0b", "😀", "\ud800", "é", " ", longString(300), longString(70_000)];
const EXPRESSIONS = [
  "input.k", "'fixed'", "additional_metadata.k", "input.n", "size(input.l)", "input.n * 1000", "input.l[0]",
  "input.l.map(a, input.l.map(b, a + b).size()).size()", "string(input.l.exists(x, input.l.exists(y, y == x + 0.5)))",
  "input.l.all(x, input.l.all(y, input.l.all(z, true)))", "input.s.matches('a{1000}')", "google.protobuf.Value{}",
  `${"(".repeat(200)}1${")".repeat(200)}`, `'${longString(600)}'`, "input.", "1 +", "input.k + input.k + input.k",
  "timestamp(input.t).getHours('America/New_York')", "[1, 2, 3].exists(x, x == 1) ? 'a' : 'b'",
];

/** Boundary strings for a field, by its name (queues, types, ids, expressions, page tokens). */
function stringConstants(field: DescField): string[] {
  const name = field.name;
  if (name === "queue" || name === "queues") return ["fz-q1", "fz-q2", "default", "q.1:x-y", "bad name", "-lead", longString(128, "q"), longString(129, "q"), ...COMMON_STRINGS];
  if (name === "type" || name === "batch_types") return ["fz-a", "fz-b", "fz-c", longString(256, "t"), longString(257, "t"), ...COMMON_STRINGS];
  if (name === "expression" || name === "max_runs_expression") return [...EXPRESSIONS, ...COMMON_STRINGS];
  if (name === "page_token") return ["0", "1", "99999999999999999999", "-1", "1e3", longString(20, "9"), ...COMMON_STRINGS];
  if (name.endsWith("id")) return ["nope", "a/b:c@d", longString(128, "i"), longString(129, "i"), ...COMMON_STRINGS];
  return COMMON_STRINGS;
}

const text = (s: string) => new TextEncoder().encode(s);
const PAYLOADS = [
  new Uint8Array(0),
  ...['{"k":"a","n":3,"l":[1,2,3],"s":"aaaa","t":"2020-01-01T00:00:00Z"}', '{"k":1}', "{", "null", "[]", '"str"',
    deepJson(33), deepJson(5000), deepJson(100_000),
    JSON.stringify({ k: "a", l: Array.from({ length: 3000 }, (_, i) => i) }),
    JSON.stringify({ k: "k".repeat(300) }),
    JSON.stringify({ k: "a", pad: "x".repeat(64 * 1024) })].map(text),
  new Uint8Array(1024 * 1024 + 1),
];

/** The boundary values of a scalar field: the constants every sweep sends, and random ones draw from most. */
function scalarConstants(field: DescField, scalar: ScalarType, ctx: FuzzContext): unknown[] {
  switch (scalar) {
    case ScalarType.STRING:
      return stringConstants(field);
    case ScalarType.BYTES:
      return field.name === "payload" ? PAYLOADS : [new Uint8Array(0), new Uint8Array([0, 255]), new Uint8Array(1024 * 1024 + 1)];
    case ScalarType.BOOL:
      return [false, true];
    case ScalarType.INT64: case ScalarType.SINT64: case ScalarType.SFIXED64:
      return [
        0n, 1n, -1n, 2n ** 31n - 1n, 2n ** 53n - 1n, 2n ** 53n + 1n, INT64_MAX, INT64_MIN, INT64_MAX - 1n, 106_751_991_000n * BigInt(DAY_MS),
        ...[ctx.nowMs, ctx.nowMs - 1000, ctx.nowMs + 60_000, ctx.nowMs + 30 * DAY_MS, ctx.nowMs + 400 * 365 * DAY_MS, 30 * DAY_MS, 2 ** 31].map(BigInt),
      ];
    case ScalarType.UINT64: case ScalarType.FIXED64:
      return [0n, 1n, 2n ** 64n - 1n, 2n ** 63n];
    case ScalarType.INT32: case ScalarType.SINT32: case ScalarType.SFIXED32:
      return [0, 1, -1, 1000, 1001, 2 ** 31 - 1, -(2 ** 31)];
    case ScalarType.UINT32: case ScalarType.FIXED32:
      return [0, 1, 9, 10, 100, 1000, 1001, 2 ** 31 - 1, 2 ** 32 - 1];
    case ScalarType.DOUBLE:
      return [0, -0, 1, 0.5, 1e-6, 1e6 + 1, 1e308, -1e308, Number.MAX_VALUE, Number.MIN_VALUE, NaN, Infinity, -Infinity];
    case ScalarType.FLOAT:
      return [0, 1, -1, NaN, Infinity, -Infinity, 3.4e38];
  }
}

function scalarRandom(field: DescField, scalar: ScalarType): fc.Arbitrary<unknown> {
  switch (scalar) {
    case ScalarType.STRING:
      return fc.string({ maxLength: field.name === "expression" || field.name === "max_runs_expression" ? 20 : 12 });
    case ScalarType.BYTES:
      return field.name === "payload" ? fc.oneof(fc.json({ maxDepth: 4 }).map(text), fc.uint8Array({ maxLength: 64 })) : fc.uint8Array({ maxLength: 32 });
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.INT64: case ScalarType.SINT64: case ScalarType.SFIXED64:
      return fc.bigInt({ min: INT64_MIN, max: INT64_MAX });
    case ScalarType.UINT64: case ScalarType.FIXED64:
      return fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
    case ScalarType.INT32: case ScalarType.SINT32: case ScalarType.SFIXED32:
      return fc.integer();
    case ScalarType.UINT32: case ScalarType.FIXED32:
      return fc.nat();
    case ScalarType.DOUBLE:
      return fc.double();
    case ScalarType.FLOAT:
      return fc.float();
  }
}

function scalarArb(field: DescField, scalar: ScalarType, ctx: FuzzContext): fc.Arbitrary<unknown> {
  return fc.oneof({ arbitrary: fc.constantFrom(...scalarConstants(field, scalar, ctx)), weight: 3 }, { arbitrary: scalarRandom(field, scalar), weight: 1 });
}

/**
 * A plausible value for a scalar field: what a correct caller would send. Most fields of
 * a generated request take one, so that the request gets past validation of the others
 * and the one boundary value in it reaches the code behind.
 */
function plausibleScalar(field: DescField, scalar: ScalarType): unknown {
  const name = field.name;
  switch (scalar) {
    case ScalarType.STRING:
      if (name === "queue" || name === "queues") return "fz-q1";
      if (name === "type" || name === "batch_types") return "fz-a";
      if (name === "expression") return "input.k";
      if (name.endsWith("worker_id")) return "fz-worker";
      if (name === "content_type") return "application/json";
      return "";
    case ScalarType.BYTES:
      return name === "payload" ? new TextEncoder().encode('{"k":"a","n":3,"l":[1,2,3],"s":"aaaa"}') : new Uint8Array(0);
    case ScalarType.BOOL:
      return false;
    case ScalarType.INT64: case ScalarType.SINT64: case ScalarType.SFIXED64: case ScalarType.UINT64: case ScalarType.FIXED64:
      return name.endsWith("_ms") && (name.startsWith("max_delay") || name.startsWith("grace")) ? 1000n : 0n;
    case ScalarType.INT32: case ScalarType.SINT32: case ScalarType.SFIXED32:
      return 1;
    case ScalarType.UINT32: case ScalarType.FIXED32:
      return name === "max_deliveries" || name === "max_runs" || name === "max_size" || name === "max" ? 2 : name === "priority" ? 5 : 0;
    case ScalarType.DOUBLE: case ScalarType.FLOAT:
      return 1;
  }
}

/**
 * An init object for `desc` (protobuf-es shape). Each field is absent, plausible (most
 * often), or a boundary value; a repeated field is empty, short, or over a count bound
 * (one element repeated).
 */
function messageArb(desc: DescMessage, ctx: FuzzContext, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const fields: Record<string, fc.Arbitrary<unknown>> = {};
  for (const field of desc.fields) {
    if (field.oneof) continue; // no request has one; a oneof's init shape differs
    const boundary = fieldArb(field, ctx, depth);
    if (!boundary) continue;
    const plausible = plausibleField(field, ctx, depth);
    fields[field.localName] = plausible ? fc.oneof({ arbitrary: plausible, weight: 5 }, { arbitrary: boundary, weight: 1 }) : boundary;
  }
  return fc.record(fields, { requiredKeys: [] });
}

function plausibleField(field: DescField, ctx: FuzzContext, depth: number): fc.Arbitrary<unknown> | undefined {
  switch (field.fieldKind) {
    case "scalar":
      return fc.constant(plausibleScalar(field, field.scalar));
    case "enum":
      return fc.constant(field.enum.values.find((v) => v.number !== 0)?.number ?? 0);
    case "message":
      return depth >= 4 ? undefined : messageArb(field.message, ctx, depth + 1);
    case "list":
      if (field.listKind === "scalar") return fc.constant([plausibleScalar(field, field.scalar)]);
      if (field.listKind === "message" && depth < 4) return messageArb(field.message, ctx, depth + 1).map((m) => [m]);
      return undefined;
    case "map":
      return fc.constant({});
  }
}

function fieldArb(field: DescField, ctx: FuzzContext, depth: number): fc.Arbitrary<unknown> | undefined {
  switch (field.fieldKind) {
    case "scalar":
      return scalarArb(field, field.scalar, ctx);
    case "enum":
      return fc.constantFrom(...field.enum.values.map((v) => v.number), 99, -1);
    case "message":
      return depth >= 4 ? undefined : messageArb(field.message, ctx, depth + 1);
    case "list": {
      const element = field.listKind === "scalar" ? scalarArb(field, field.scalar, ctx)
        : field.listKind === "enum" ? fc.constantFrom(...field.enum.values.map((v) => v.number), 99)
        : depth >= 4 ? undefined : messageArb(field.message, ctx, depth + 1);
      if (!element) return undefined;
      // Over a count bound: many copies of a plausible element (random ones could weigh gigabytes).
      const plain = field.listKind === "scalar" ? plausibleScalar(field, field.scalar)
        : field.listKind === "enum" ? 1 : plausibleMessage(field.message, depth + 1);
      return fc.oneof(
        { arbitrary: fc.array(element, { maxLength: 3 }), weight: 6 },
        { arbitrary: fc.constantFrom(17, 101, 257, 1001).map((n) => Array<unknown>(n).fill(plain)), weight: 1 },
      );
    }
    case "map": {
      const value = field.mapKind === "scalar" ? scalarArb(field, field.scalar, ctx) : field.mapKind === "enum" ? fc.constant(0) : depth >= 4 ? undefined : messageArb(field.message, ctx, depth + 1);
      if (!value || field.mapKey !== ScalarType.STRING) return undefined;
      return fc.oneof(
        { arbitrary: fc.dictionary(fc.oneof(fc.constantFrom("k", "", "\0", longString(300)), fc.string({ maxLength: 8 })), value, { maxKeys: 3 }), weight: 6 },
        { arbitrary: fc.constant(Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, "v"]))), weight: 1 },
      );
    }
  }
}

/** Paths to string fields (through singular and repeated messages), for invalid UTF-8. */
function stringPaths(desc: DescMessage, depth = 0): DescField[][] {
  const paths: DescField[][] = [];
  for (const f of desc.fields) {
    const isString = (f.fieldKind === "scalar" || (f.fieldKind === "list" && f.listKind === "scalar")) && f.scalar === ScalarType.STRING;
    if (isString || (f.fieldKind === "map" && f.mapKey === ScalarType.STRING)) paths.push([f]);
    const nested = f.fieldKind === "message" ? f.message : f.fieldKind === "list" && f.listKind === "message" ? f.message : undefined;
    if (nested && depth < 3) for (const p of stringPaths(nested, depth + 1)) paths.push([f, ...p]);
  }
  return paths;
}

/**
 * Bytes that, appended to a message, set the string at `path` to `bad` (a later
 * occurrence of a singular field wins, of a message field merges, of a repeated one adds).
 */
function invalidUtf8Fragment(path: DescField[], bad: Uint8Array): Uint8Array {
  const [field, ...rest] = path;
  const w = new BinaryWriter();
  if (rest.length === 0) {
    if (field!.fieldKind === "map") {
      const entry = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(bad).finish();
      w.tag(field!.number, WireType.LengthDelimited).bytes(entry);
    } else {
      w.tag(field!.number, WireType.LengthDelimited).bytes(bad);
    }
  } else {
    w.tag(field!.number, WireType.LengthDelimited).bytes(invalidUtf8Fragment(rest, bad));
  }
  return w.finish();
}

const INVALID_UTF8 = [new Uint8Array([0xff]), new Uint8Array([0x61, 0xc3]), new Uint8Array([0xed, 0xa0, 0x80]), new Uint8Array([0xc0, 0x80])];

/** Queue names a decoded init object mentions (fields named queue, at any depth). */
function queuesIn(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => queuesIn(v, out));
  else if (value && typeof value === "object" && !(value instanceof Uint8Array)) {
    for (const [k, v] of Object.entries(value)) {
      if (k === "queue" && typeof v === "string") out.push(v);
      else queuesIn(v, out);
    }
  }
  return out;
}

const summarize = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v === "bigint") return `${v}n`;
    if (v instanceof Uint8Array) return `<${v.byteLength} bytes${v.byteLength <= 40 ? `: ${new TextDecoder().decode(v)}` : ""}>`;
    if (typeof v === "string" && v.length > 60) return `${v.slice(0, 40)}…(${v.length} chars)`;
    if (Array.isArray(v) && v.length > 5) return [...v.slice(0, 2), `…(${v.length} items)`];
    if (typeof v === "number" && !Number.isFinite(v)) return String(v);
    return v;
  }).slice(0, 600);

/** A message with every field plausible (what a correct caller sends), repeated fields with one element. */
function plausibleMessage(desc: DescMessage, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of desc.fields) {
    if (f.oneof) continue;
    if (f.fieldKind === "scalar") out[f.localName] = plausibleScalar(f, f.scalar);
    else if (f.fieldKind === "enum") out[f.localName] = f.enum.values.find((v) => v.number !== 0)?.number ?? 0;
    else if (f.fieldKind === "message" && depth < 4) out[f.localName] = plausibleMessage(f.message, depth + 1);
    else if (f.fieldKind === "list" && f.listKind === "scalar") out[f.localName] = [plausibleScalar(f, f.scalar)];
    else if (f.fieldKind === "list" && f.listKind === "message" && depth < 4) out[f.localName] = [plausibleMessage(f.message, depth + 1)];
  }
  return out;
}

/** Paths to every field: through singular messages and the first element of repeated ones. */
function fieldPaths(desc: DescMessage, depth = 0): DescField[][] {
  const paths: DescField[][] = [];
  for (const f of desc.fields) {
    if (f.oneof) continue;
    paths.push([f]);
    const nested = f.fieldKind === "message" ? f.message : f.fieldKind === "list" && f.listKind === "message" ? f.message : undefined;
    if (nested && depth < 3) for (const p of fieldPaths(nested, depth + 1)) paths.push([f, ...p]);
  }
  return paths;
}

/** `base` (a plausible message) with the field at `path` set to `value`. */
function withValue(base: Record<string, unknown>, path: DescField[], value: unknown): Record<string, unknown> {
  const copy = structuredClone(base);
  let at: Record<string, unknown> = copy;
  for (const [i, f] of path.entries()) {
    if (i === path.length - 1) {
      at[f.localName] = value;
      break;
    }
    const next = at[f.localName];
    const inner = Array.isArray(next) ? (next[0] as Record<string, unknown>) : (next as Record<string, unknown> | undefined);
    if (!inner) break;
    at = inner;
  }
  return copy;
}

/**
 * A typed request of `method`: mostly a plausible request with one or two fields set to a
 * boundary value (so that the value gets past validation of the rest), sometimes a
 * request with every field random; sometimes with an invalid UTF-8 string appended.
 */
export function typedRequestArb(method: FuzzMethod, ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  const paths = stringPaths(method.input);
  const utf8 = paths.length === 0 ? fc.constant(undefined)
    : fc.oneof({ arbitrary: fc.constant(undefined), weight: 6 }, { arbitrary: fc.tuple(fc.constantFrom(...paths), fc.constantFrom(...INVALID_UTF8)), weight: 1 });
  const base = plausibleMessage(method.input);
  const allPaths = fieldPaths(method.input);
  const mutation = fc.constantFrom(...(allPaths.length > 0 ? allPaths : [[]])).chain((path) => {
    if (path.length === 0) return fc.constant({ path, value: undefined });
    const arb = fieldArb(path.at(-1)!, ctx, path.length);
    return (arb ?? fc.constant(undefined)).map((value) => ({ path, value }));
  });
  const init = allPaths.length === 0 ? fc.constant({}) : fc.oneof(
    { arbitrary: fc.array(mutation, { minLength: 1, maxLength: 2 }).map((ms) => ms.reduce((msg, m) => withValue(msg, m.path, m.value), base)), weight: 4 },
    { arbitrary: messageArb(method.input, ctx, 0), weight: 1 },
  );
  return fc.tuple(init, utf8).map(([init, bad]) => encodeRequest(method, init, base, bad));
}

/** Encodes a typed request (with an invalid UTF-8 string appended when `bad` says where). */
function encodeRequest(method: FuzzMethod, init: Record<string, unknown>, base: Record<string, unknown>, bad?: readonly [DescField[], Uint8Array]): FuzzRequest {
  const queues = queuesIn(init);
  let bytes: Uint8Array = toBinary(method.input, create(method.input, init as never));
  let describe = summarize(init);
  if (bytes.byteLength > REQUEST_BYTES_MAX) {
    // A fully random request can combine several large values: send its plausible form.
    bytes = toBinary(method.input, create(method.input, base as never));
    describe = `(a random request of ${bytes.byteLength} bytes, replaced by the plausible one) ${summarize(base)}`;
  }
  if (bad) {
    const [path, badBytes] = bad;
    bytes = concat(bytes, invalidUtf8Fragment(path, badBytes));
    describe += ` + invalid UTF-8 ${JSON.stringify([...badBytes])} in ${path.map((f) => f.name).join(".")}`;
  }
  return fuzzRequest(bytes, describe, queues);
}

/** Every boundary value a field can take in the sweep (see boundarySweep). */
function fieldConstants(field: DescField, ctx: FuzzContext, depth: number): unknown[] {
  switch (field.fieldKind) {
    case "scalar":
      return scalarConstants(field, field.scalar, ctx);
    case "enum":
      return [...field.enum.values.map((v) => v.number), 99, -1];
    case "message":
      return [undefined, {}];
    case "list": {
      const plain = field.listKind === "scalar" ? plausibleScalar(field, field.scalar) : field.listKind === "enum" ? 1 : depth < 4 ? plausibleMessage(field.message, depth + 1) : {};
      const counts = [0, 17, 101, 257, 1001].map((n) => Array<unknown>(n).fill(plain));
      const singles = field.listKind === "scalar" ? scalarConstants(field, field.scalar, ctx).map((c) => [c]) : [];
      return [...counts, ...singles];
    }
    case "map":
      return [{}, Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, "v"])), { [longString(300)]: "v" }, { k: longString(70_000) }, { "\0": "v" }, { "": "" }];
  }
}

/**
 * Deterministic coverage of every single boundary value: the plausible request, then for
 * every field (at any depth) that request with the field set to each of its boundary
 * values, then with an invalid UTF-8 string in each string field.
 */
export function boundarySweep(method: FuzzMethod, ctx: FuzzContext): FuzzRequest[] {
  const base = plausibleMessage(method.input);
  const out = [encodeRequest(method, base, base)];
  for (const path of fieldPaths(method.input)) {
    for (const value of fieldConstants(path.at(-1)!, ctx, path.length)) out.push(encodeRequest(method, withValue(base, path, value), base));
  }
  for (const path of stringPaths(method.input)) out.push(encodeRequest(method, base, base, [path, INVALID_UTF8[0]!]));
  return out;
}

/** A request that prints as its description in fast-check's counterexamples. */
function fuzzRequest(bytes: Uint8Array, describe: string, queues: string[]): FuzzRequest {
  return { bytes, describe, queues, [fc.toStringMethod]: () => describe } as FuzzRequest;
}

/** Random bytes, or a typed request's bytes cut short or with bytes flipped. */
export function rawBytesArb(method: FuzzMethod, ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  const hex = (b: Uint8Array) => Buffer.from(b.subarray(0, 24)).toString("hex") + (b.byteLength > 24 ? `…(${b.byteLength} bytes)` : "");
  return fc.oneof(
    fc.uint8Array({ maxLength: 256 }).map((bytes) => fuzzRequest(bytes, `random ${hex(bytes)}`, [])),
    fc.tuple(typedRequestArb(method, ctx), fc.nat(), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 })).map(([typed, cut, flips]) => {
      const bytes = typed.bytes.slice(0, typed.bytes.byteLength === 0 ? 0 : cut % (typed.bytes.byteLength + 1));
      for (const [at, value] of flips) if (bytes.byteLength > 0) bytes[at % bytes.byteLength] = value;
      return fuzzRequest(bytes, `mangled ${hex(bytes)} from ${typed.describe.slice(0, 200)}`, []);
    }),
  );
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a);
  out.set(b, a.byteLength);
  return out;
}
