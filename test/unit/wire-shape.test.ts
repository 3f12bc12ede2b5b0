/** The pass before protobuf-es decodes a request (src/rpc/wire-shape.ts): nesting and group encoding refused, the rest left alone. */
import { describe, expect, it } from "vitest";
import { toBinary, create, type DescMessage } from "@bufbuild/protobuf";
import { EnqueueBatchRequestSchema } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { wireShapeRefusal } from "../../src/rpc/wire-shape.js";

/** A message whose field 1 holds itself (no conveyor message does; a future one might). */
const recursive = (() => {
  const desc = { typeName: "test.Node", fields: [] as unknown[] };
  desc.fields.push({ number: 1, fieldKind: "message", message: desc });
  return desc as unknown as DescMessage;
})();

/** `levels` messages, each the field 1 of the one around it. */
function nested(levels: number): Uint8Array {
  let inner = new Uint8Array(0);
  for (let i = 1; i < levels; i++) {
    const lengthBytes: number[] = [];
    for (let n = inner.length; ; n >>>= 7) {
      if (n < 0x80) { lengthBytes.push(n); break; }
      lengthBytes.push((n & 0x7f) | 0x80);
    }
    inner = Uint8Array.from([0x0a, ...lengthBytes, ...inner]);
  }
  return inner;
}

describe("wireShapeRefusal", () => {
  it("accepts nesting up to the limit and refuses one level more, naming the limit", () => {
    expect(wireShapeRefusal(recursive, nested(8), 8)).toBeUndefined();
    expect(wireShapeRefusal(recursive, nested(9), 8)).toContain("deeper than 8 levels");
  });

  it("counts groups as levels: a million group starts are refused after the limit, an empty group passes", () => {
    expect(wireShapeRefusal(recursive, Buffer.alloc(1 << 20, 0x0b), 32)).toContain("deeper than 32 levels");
    expect(wireShapeRefusal(EnqueueBatchRequestSchema, Buffer.alloc(1 << 20, 0x23), 32)).toContain("deeper than 32 levels"); // unknown field 4
    expect(wireShapeRefusal(EnqueueBatchRequestSchema, Uint8Array.from([0x23, 0x24]), 32)).toBeUndefined();
    // Inside a nested message: TaskSpec (field 1 of EnqueueBatchRequest's tasks) with 31 nested groups of field 9: 33 levels with the request and the task.
    const groups = (n: number) => [...Array<number>(n).fill(0x4b), ...Array<number>(n).fill(0x4c)];
    expect(wireShapeRefusal(EnqueueBatchRequestSchema, Uint8Array.from([0x0a, 62, ...groups(31)]), 32)).toContain("deeper than 32 levels");
    expect(wireShapeRefusal(EnqueueBatchRequestSchema, Uint8Array.from([0x0a, 62, ...groups(31)]), 40)).toBeUndefined();
  });

  it("leaves an ordinary request, and bytes that end early, to protobuf-es", () => {
    const batch = toBinary(EnqueueBatchRequestSchema, create(EnqueueBatchRequestSchema, {
      tasks: Array.from({ length: 3 }, (_, i) => ({ queue: `q${i}`, type: "t", payload: new Uint8Array(10), metadata: { a: "b" } })),
    }));
    expect(wireShapeRefusal(EnqueueBatchRequestSchema, batch, 32)).toBeUndefined();
    expect(wireShapeRefusal(EnqueueBatchRequestSchema, batch.subarray(0, batch.length - 3), 32)).toBeUndefined();
  });
});
