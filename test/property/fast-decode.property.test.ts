/**
 * The hand decoders (src/rpc/fast-decode.ts: the enqueue, Settle and Lease requests, the Lease answer, the session frames) against protobuf-es:
 * for arbitrary messages, the bytes decode to a message equal to protobuf-es's, with the
 * same fields set; and for arbitrary bytes (well-formed requests cut, flipped, repeated or
 * with fields appended, and random noise), the hand decoder either gives up (the caller
 * then uses protobuf-es) or returns exactly what protobuf-es returns. Never a different
 * message, never a throw.
 */
import fc from "fast-check";
import { create, equals, fromBinary, ScalarType, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { EnqueueBatchRequestSchema, EnqueueRequestSchema } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { TaskSpecSchema } from "../../src/gen/conveyor/v1/task_pb.js";
import { LeaseRequestSchema, LeaseResponseSchema, SettleRequestSchema } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { SessionRequestSchema, SessionResponseSchema } from "../../src/gen/conveyor/v1/session_service_pb.js";
import { decodeMessage, HAND_DECODED } from "../../src/rpc/fast-decode.js";
import { decodeRequest } from "../../src/rpc/request-decode.js";
import { messageArbitrary } from "../support/message-arbitrary.js";

const SCHEMAS: DescMessage[] = [
  EnqueueRequestSchema, EnqueueBatchRequestSchema, LeaseResponseSchema, SettleRequestSchema, LeaseRequestSchema,
  SessionRequestSchema, SessionResponseSchema,
];

/** protobuf-es's reading of `bytes`, or undefined where it refuses them. */
function reference(schema: DescMessage, bytes: Uint8Array): unknown {
  try {
    return fromBinary(schema, bytes);
  } catch {
    return undefined;
  }
}

function expectSame(schema: DescMessage, actual: unknown, expected: unknown): void {
  expect(expected).toBeDefined();
  // Equal values, and the same fields present (an optional field set to 0 is set).
  if (!equals(schema, actual as never, expected as never)) expect(actual).toEqual(expected);
  expect(actual).toEqual(expected);
}

const wellFormed = (schema: DescMessage) => messageArbitrary(schema).map((m) => toBinary(schema, create(schema, m as never)));

/** Bytes near a well-formed request: cut short, a byte changed, doubled, or with another field's bytes appended. */
const damaged = (schema: DescMessage) => fc.tuple(wellFormed(schema), fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom("cut", "flip", "double", "append"), fc.uint8Array({ maxLength: 12 }))
  .map(([bytes, at, byte, how, extra]) => {
    const i = bytes.length === 0 ? 0 : at % bytes.length;
    switch (how) {
      case "cut": return bytes.subarray(0, i);
      case "flip": { const copy = Uint8Array.from(bytes); if (copy.length > 0) copy[i] = byte; return copy; }
      case "double": return Uint8Array.from([...bytes, ...bytes]);
      default: return Uint8Array.from([...bytes, ...extra]);
    }
  });

describe("hand decoders read as protobuf-es does", () => {
  for (const schema of SCHEMAS) {
    const decode = HAND_DECODED.get(schema.typeName)!;

    it(`${schema.typeName}: every well-formed message, decoded by hand`, () => {
      fc.assert(fc.property(wellFormed(schema), (bytes) => {
        const actual = decode(bytes);
        // A string protobuf-es cannot take (a lone surrogate written as U+FFFD is fine; bytes
        // that are not UTF-8 cannot come from toBinary) never makes the hand decoder give up here.
        expect(actual).toBeDefined();
        expectSame(schema, actual, reference(schema, bytes));
      }), { numRuns: 400 });
    });

    it(`${schema.typeName}: damaged or random bytes: the same message, or the hand decoder gives up`, () => {
      fc.assert(fc.property(fc.oneof(damaged(schema), fc.uint8Array({ maxLength: 64 })), (bytes) => {
        const actual = decode(bytes);
        if (actual !== undefined) expectSame(schema, actual, reference(schema, bytes));
        // The server's path (requests) and the SDK's (answers) read either way as protobuf-es alone would.
        const expected = reference(schema, bytes);
        if (expected !== undefined) expectSame(schema, decodeRequest(schema, bytes), expected);
        if (expected !== undefined) expectSame(schema, decodeMessage(schema, bytes), expected);
      }), { numRuns: 1_000 });
    });
  }

  it("knows every field of TaskSpec (a field added to the proto would make it give up on every task that sets it)", () => {
    // Every field set to a value that is not its zero, built from the descriptor.
    const init: Record<string, unknown> = {};
    for (const f of TaskSpecSchema.fields) {
      if (f.fieldKind === "map") init[f.localName] = { k: "v" };
      else if (f.fieldKind === "scalar") {
        init[f.localName] = f.scalar === ScalarType.STRING ? "s" : f.scalar === ScalarType.BYTES ? Uint8Array.of(1) :
          f.scalar === ScalarType.INT64 ? 5n : 3;
      } else throw new Error(`TaskSpec.${f.name} is a ${f.fieldKind}: teach fast-decode.ts (and this test) about it`);
    }
    const bytes = toBinary(EnqueueRequestSchema, create(EnqueueRequestSchema, { task: init as never }));
    const actual = HAND_DECODED.get(EnqueueRequestSchema.typeName)!(bytes);
    expect(actual).toBeDefined();
    expectSame(EnqueueRequestSchema, actual, fromBinary(EnqueueRequestSchema, bytes));
  });

  it("knows every field of the worker's messages and the session frames (a field added to the proto would make it give up on every one)", () => {
    // Every field set to a value that is not its zero, built from the descriptors.
    const full = (desc: DescMessage): Record<string, unknown> => {
      const init: Record<string, unknown> = {};
      for (const f of desc.fields) {
        // A oneof of bytes (SessionResponse's): its last member set; each member is checked by the well-formed property.
        if (f.oneof && f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES) init[f.oneof.localName] = { case: f.localName, value: Uint8Array.of(1) };
        else if (f.oneof) throw new Error(`${desc.typeName}.${f.name} is in a oneof of another kind: teach this test about it`);
        else if (f.fieldKind === "map") init[f.localName] = { k: "v" };
        else if (f.fieldKind === "enum") init[f.localName] = 2;
        else if (f.fieldKind === "list" && f.listKind === "message") init[f.localName] = [full(f.message), full(f.message)];
        else if (f.fieldKind === "list" && f.listKind === "scalar" && f.scalar === ScalarType.STRING) init[f.localName] = ["a", ""];
        else if (f.fieldKind === "scalar") {
          init[f.localName] = f.scalar === ScalarType.STRING ? "s" : f.scalar === ScalarType.BYTES ? Uint8Array.of(1) :
            f.scalar === ScalarType.INT64 || f.scalar === ScalarType.UINT64 ? 5n : f.scalar === ScalarType.BOOL ? true : 3;
        } else throw new Error(`${desc.typeName}.${f.name} is a ${f.fieldKind}: teach fast-decode.ts (and this test) about it`);
      }
      return init;
    };
    for (const schema of [LeaseResponseSchema, SettleRequestSchema, LeaseRequestSchema, SessionRequestSchema, SessionResponseSchema]) {
      const bytes = toBinary(schema, create(schema, full(schema) as never));
      const actual = HAND_DECODED.get(schema.typeName)!(bytes);
      expect(actual, schema.typeName).toBeDefined();
      expectSame(schema, actual, fromBinary(schema, bytes));
    }
  });

  it("gives up on what it does not handle, so that protobuf-es decides", () => {
    const spec = toBinary(EnqueueRequestSchema, create(EnqueueRequestSchema, { task: { type: "t", queue: "q" } }));
    const unknownField = Uint8Array.from([...spec, 0xf8, 0x01, 0x01]); // field 31, varint
    expect(HAND_DECODED.get(EnqueueRequestSchema.typeName)!(unknownField)).toBeUndefined();
    expect(HAND_DECODED.get(EnqueueRequestSchema.typeName)!(Uint8Array.from([...spec, ...spec]))).toBeUndefined(); // merged by protobuf
    const notUtf8 = Uint8Array.from([0x0a, 0x03, 0x0a, 0x01, 0xff]); // task { type: <0xff> }
    expect(HAND_DECODED.get(EnqueueRequestSchema.typeName)!(notUtf8)).toBeUndefined();
    expect(HAND_DECODED.get(EnqueueBatchRequestSchema.typeName)!(Uint8Array.from([0x0a, 0x05, 0x0a, 0x01]))).toBeUndefined(); // ends early
  });
});
