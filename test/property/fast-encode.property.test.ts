/**
 * The hand encoders (src/rpc/fast-encode.ts) against protobuf-es: for arbitrary messages
 * of every hand-encoded type, their bytes decode to the message that reflection's bytes
 * (`toBinary(create(…))`) decode to. Byte equality is not required (field order may
 * differ); decoding equality is.
 */
import fc from "fast-check";
import { create, equals, fromBinary, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { HAND_ENCODED, encodeWith, fastEncoderFor } from "../../src/rpc/fast-encode.js";
import { messageArbitrary } from "../support/message-arbitrary.js";

const reflectionBytes = (schema: DescMessage, m: unknown) => toBinary(schema, create(schema, m as never));

describe("hand encoders decode as reflection's bytes do", () => {
  for (const { schema, encode } of HAND_ENCODED) {
    it(schema.typeName, () => {
      fc.assert(fc.property(messageArbitrary(schema), (m) => {
        const expected = fromBinary(schema, reflectionBytes(schema, m));
        const actual = fromBinary(schema, encodeWith(encode, m));
        if (!equals(schema, actual, expected)) expect(actual).toEqual(expected);
      }), { numRuns: schema.fields.length > 10 ? 400 : 200 });
    });
  }

  it("the response encoders grpc-js calls take real messages too (a forwarded answer)", () => {
    const responses = HAND_ENCODED.filter(({ schema }) => fastEncoderFor(schema));
    expect(responses.length).toBeGreaterThan(5);
    for (const { schema } of responses) {
      const fast = fastEncoderFor(schema)!;
      fc.assert(fc.property(messageArbitrary(schema), (m) => {
        const message = create(schema, m as never);
        expect(equals(schema, fromBinary(schema, fast(message)), fromBinary(schema, toBinary(schema, message)))).toBe(true);
      }), { numRuns: 100 });
    }
  });
});
