/**
 * A field added to a hand-encoded message must not be dropped silently: each hand
 * encoder's list of fields (src/rpc/fast-encode.ts) must be the descriptor's, every
 * field must have implicit presence (the encoders skip zero values, which is only right
 * without `optional`, or listed as `optional` by the encoder), and every message a hand-encoded one holds is hand-encoded too.
 */
import { create, equals, fromBinary, toBinary, type DescField } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { HAND_ENCODED, encodeWith, fastEncoderFor } from "../../src/rpc/fast-encode.js";
import { TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { WorkerService } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { DeliverySchema, LeaseResponseSchema } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { TaskSchema } from "../../src/gen/conveyor/v1/task_pb.js";

/** A oneof is one member of the init shape (`outcome: { case, value }`), listed by its name. */
const membersOf = (fields: readonly DescField[]) => [...new Set(fields.map((f) => f.oneof?.localName ?? f.localName))].sort();

describe("hand-encoded messages", () => {
  it("are some (anti-vacuity)", () => {
    expect(HAND_ENCODED.map((h) => h.schema.typeName)).toEqual(expect.arrayContaining(["conveyor.v1.Task", "conveyor.v1.LeaseResponse"]));
  });

  for (const { schema, fields, optional } of HAND_ENCODED) {
    describe(schema.typeName, () => {
      it("write every field of the descriptor, and only those", () => {
        expect([...fields].sort()).toEqual(membersOf(schema.fields));
      });

      it("list exactly their fields with explicit presence as optional (written whenever set, zero included)", () => {
        const explicit = schema.fields.filter((f) => (f.fieldKind === "scalar" || f.fieldKind === "enum") && (f.presence !== 2 || f.oneof));
        expect(explicit.map((f) => f.localName).sort()).toEqual([...optional].sort());
      });

      it("hold only hand-encoded messages", () => {
        const held = schema.fields.flatMap((f) => f.message ? [f.message.typeName] : []);
        const known = new Set(HAND_ENCODED.map((h) => h.schema.typeName));
        expect(held.filter((t) => !known.has(t))).toEqual([]);
      });
    });
  }

  it("are the answers of the hot methods", () => {
    const hot = [WorkerService.method.lease, WorkerService.method.settle, WorkerService.method.heartbeat, TaskService.method.enqueue,
      TaskService.method.enqueueBatch, TaskService.method.enqueueTx, TaskService.method.getTask, TaskService.method.waitTask,
      TaskService.method.cancelTask];
    expect(hot.filter((m) => !fastEncoderFor(m.output)).map((m) => m.name)).toEqual([]);
    // And the producer's requests.
    expect([TaskService.method.enqueue, TaskService.method.enqueueBatch].filter((m) => !fastEncoderFor(m.input)).map((m) => m.name)).toEqual([]);
    expect(fastEncoderFor(TaskSchema)).toBeUndefined(); // hand-encoded inside answers, never an answer itself
  });

  it("write back the unknown fields of a decoded message (a newer peer's answer passed on)", () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited).bytes(toBinary(DeliverySchema, create(DeliverySchema, {
      leaseId: "l", tasks: [create(TaskSchema, { id: "t" })],
    })));
    w.tag(99, WireType.Varint).uint32(7); // a field this version does not know
    const decoded = fromBinary(LeaseResponseSchema, w.finish());
    expect(decoded.$unknown?.length).toBe(1);
    const again = fromBinary(LeaseResponseSchema, fastEncoderFor(LeaseResponseSchema)!(decoded));
    expect(again.$unknown).toEqual(decoded.$unknown);
    expect(equals(LeaseResponseSchema, again, decoded)).toBe(true);
  });

  it("encode an empty answer as no bytes, as reflection does", () => {
    for (const { schema, encode } of HAND_ENCODED) {
      expect(encodeWith(encode, {}).length, schema.typeName).toBe(0);
    }
  });
});
