/**
 * Arbitrary protobuf-es messages built from a message descriptor, in the init shape
 * handlers return: any field may be left out (its zero value), zero values are likely
 * (they are what implicit presence skips), strings cover all of Unicode (lone
 * surrogates too), int64s the whole range, and a nested message is sometimes a real
 * message (`create()`d) rather than an init shape, as answers mixing local and
 * forwarded parts are. Built from the descriptor, so a field added to the proto is
 * generated at once.
 */
import fc from "fast-check";
import { create, ScalarType, type DescField, type DescMessage, type DescOneof } from "@bufbuild/protobuf";

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/** Values of one scalar type, the zero value weighted in. */
function scalar(type: ScalarType): fc.Arbitrary<unknown> {
  const withZero = <T>(zero: T, arb: fc.Arbitrary<T>) => fc.oneof({ arbitrary: fc.constant(zero), weight: 1 }, { arbitrary: arb, weight: 3 });
  switch (type) {
    case ScalarType.STRING:
      return withZero("", fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" })));
    case ScalarType.BYTES:
      return withZero(new Uint8Array(), fc.uint8Array({ maxLength: 300 }));
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.INT32: case ScalarType.SINT32: case ScalarType.SFIXED32:
      return withZero(0, fc.integer());
    case ScalarType.UINT32: case ScalarType.FIXED32:
      return withZero(0, fc.integer({ min: 0, max: 0xffff_ffff }));
    case ScalarType.INT64: case ScalarType.SINT64: case ScalarType.SFIXED64:
      return withZero(0n, fc.oneof(fc.bigInt({ min: INT64_MIN, max: INT64_MAX }), fc.bigInt({ min: -1000n, max: 2n ** 42n })));
    case ScalarType.UINT64: case ScalarType.FIXED64:
      return withZero(0n, fc.bigInt({ min: 0n, max: UINT64_MAX }));
    case ScalarType.DOUBLE: case ScalarType.FLOAT:
      return withZero(0, fc.double({ noNaN: true }));
  }
}

function fieldValue(field: DescField, depth: number): fc.Arbitrary<unknown> {
  switch (field.fieldKind) {
    case "scalar":
      return scalar(field.scalar);
    case "enum":
      // Known values, and numbers the enum does not have (a newer peer's).
      return fc.oneof(fc.constantFrom(...field.enum.values.map((v) => v.number)), fc.integer({ min: -5, max: 1000 }));
    case "message":
      return messageArbitrary(field.message, depth + 1);
    case "list": {
      const item = field.listKind === "scalar" ? scalar(field.scalar)
        : field.listKind === "enum" ? fc.constantFrom(...field.enum.values.map((v) => v.number))
          : messageArbitrary(field.message, depth + 1);
      return fc.array(item, { maxLength: depth > 1 ? 2 : 4 });
    }
    case "map": {
      const value = field.mapKind === "scalar" ? scalar(field.scalar)
        : field.mapKind === "enum" ? fc.constantFrom(...field.enum.values.map((v) => v.number))
          : messageArbitrary(field.message, depth + 1);
      return fc.dictionary(scalar(field.mapKey).map(String), value, { maxKeys: 4 });
    }
  }
}

function oneofValue(oneof: DescOneof, depth: number): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constant({ case: undefined }),
    ...oneof.fields.map((f) => fieldValue(f, depth).map((value) => ({ case: f.localName, value }))),
  );
}

/** An arbitrary init shape (or, below the top, sometimes a real message) of `desc`. */
export function messageArbitrary(desc: DescMessage, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const record: Record<string, fc.Arbitrary<unknown>> = {};
  for (const member of desc.members) {
    // Nested messages stop at depth 3 (none of ours recurse; this bounds any that would).
    if (member.kind === "field" && (member.fieldKind === "message" || member.fieldKind === "list") && depth > 3) continue;
    record[member.localName] = member.kind === "oneof" ? oneofValue(member, depth) : fieldValue(member, depth);
  }
  const init = fc.record(record, { requiredKeys: [] });
  if (depth === 0) return init;
  return fc.oneof(init, init.map((m) => create(desc, m as never) as unknown as Record<string, unknown>));
}
