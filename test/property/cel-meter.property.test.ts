/**
 * The metered CEL of concurrency rules (src/server/rules/cel-meter.ts) rewrites every
 * expression and replaces functions of the library. These properties check that it
 * computes what the library computes, that its cost is deterministic and grows with the
 * data, and that a spent budget stops the evaluation.
 */
import fc from "fast-check";
import { celEnv, isCelError, isCelList, isCelMap, isCelUint, parse, plan } from "@bufbuild/cel";
import { describe, expect, it } from "vitest";
import { ForbiddenConstruct, compileMetered, jsonDepth, withBudget } from "../../src/server/rules/cel-meter.js";

const plainEnv = celEnv();

/** A CEL result as plain data: lists as arrays, maps as sorted entries, any error as "error". */
function normal(v: unknown): unknown {
  if (isCelError(v)) return "error";
  if (isCelList(v)) return [...v].map(normal);
  if (isCelMap(v)) return [...v.entries()].map(([k, x]) => [normal(k), normal(x)]).sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1));
  if (isCelUint(v)) return { uint: v.value };
  if (typeof v === "number" && Number.isNaN(v)) return "NaN";
  return v;
}

/** Expressions over `input` (fields n, s, l, ls, m, o) and `additional_metadata`, of mixed types. */
const exprArb = fc.letrec<{ e: string; list: string; pred: string }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom("input.n", "input.s", "input.l", "input.ls", "input.m", "input.o", "input.o.x", "additional_metadata.k",
      "1", "2.5", "'ab'", "''", "true", "[1, 2]", "{'a': 1}", "input.missing", "input.m['k1']", "input.l[0]", "input.ls[1]"),
    fc.tuple(tie("e"), fc.constantFrom("+", "-", "==", "!=", "<", "<=", "in", "&&", "||"), tie("e")).map(([a, op, b]) => `(${a} ${op} ${b})`),
    tie("e").map((a) => `size(${a})`),
    tie("e").map((a) => `!${a}`),
    tie("e").map((a) => `string(${a})`),
    tie("e").map((a) => `int(${a})`),
    fc.tuple(tie("e"), tie("e")).map(([a, b]) => `${a}.contains(${b})`),
    fc.tuple(tie("e"), tie("e")).map(([a, b]) => `${a}.startsWith(${b})`),
    fc.tuple(tie("e"), tie("e"), tie("e")).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
    fc.tuple(tie("e"), tie("e")).map(([a, b]) => `${a}[${b}]`),
    fc.constantFrom("has(input.o.x)", "has(input.o.y)", "has(input.m.k1)"),
    tie("list"),
    fc.tuple(tie("list"), fc.constantFrom("all", "exists", "exists_one", "filter"), tie("pred")).map(([l, m, p]) => `${l}.${m}(x, ${p})`),
    fc.tuple(tie("list"), tie("e")).map(([l, b]) => `${l}.map(x, ${b.replaceAll("input.n", "x")})`),
  ),
  list: fc.constantFrom("input.l", "input.ls", "input.m", "[1, 2, 3]", "input.l.map(y, y + 1)", "input.ls.filter(y, y != 'b')", "(input.l + [9])"),
  pred: fc.oneof(
    fc.constantFrom("x == 1", "x > 1", "x == 'b'", "x in input.l", "size(string(x)) > 1", "true"),
    tie("e").map((b) => `(${b} == x)`),
  ),
}));

const inputArb = fc.record({
  n: fc.integer({ min: -5, max: 5 }),
  s: fc.constantFrom("", "ab", "abc", "b"),
  l: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 5 }),
  ls: fc.array(fc.constantFrom("a", "b", "ab"), { maxLength: 5 }),
  m: fc.dictionary(fc.constantFrom("k1", "k2", "a"), fc.integer({ min: 0, max: 3 })),
  o: fc.oneof(fc.record({ x: fc.integer({ min: 0, max: 3 }) }), fc.constant({})),
});

describe("metered CEL", () => {
  it("computes what the library computes (every expression, every input)", () => {
    fc.assert(
      fc.property(exprArb.e, inputArb, (source, input) => {
        let plain: unknown;
        try {
          plain = plan(plainEnv, parse(source))({ input, additional_metadata: { k: "v" } });
        } catch {
          return; // does not parse: nothing to compare
        }
        const program = compileMetered(source);
        const metered = withBudget(1e12, () => program({ input, additional_metadata: { k: "v" } }));
        expect(normal(metered.value), source).toEqual(normal(plain));
      }),
      { seed: 9, numRuns: 1500 },
    );
  });

  it("charges deterministically, and more for more data", () => {
    const program = compileMetered("input.l.exists(x, x == 'needle')");
    const cost = (n: number) => withBudget(1e12, () => program({ input: { l: Array.from({ length: n }, (_, i) => `item${i}`) }, additional_metadata: {} })).spent;
    expect(cost(100)).toBe(cost(100));
    expect(cost(200)).toBeGreaterThan(1.9 * cost(100));
    expect(withBudget(1e12, () => compileMetered("input.user_id")({ input: { user_id: "u" }, additional_metadata: {} })).spent).toBeLessThan(50);
  });

  it("a spent budget ends the evaluation with the budget error, whatever the expression does with errors", () => {
    const input = { l: Array.from({ length: 5000 }, (_, i) => i) };
    for (const source of ["input.l.all(x, input.l.exists(y, y == x))", "input.l.map(x, x).size()", "input.l.all(x, (x in input.l) || true)"]) {
      const run = withBudget(10_000, () => compileMetered(source)({ input, additional_metadata: {} }));
      expect(run.exceeded, source).toBe(true);
      // Nothing ran on after the charge that passed the budget (each of these charges
      // ~50,000 per range; had the loops gone on, the total would be in the millions).
      expect(run.spent, source).toBeLessThan(200_000);
    }
  });

  it("a map or filter result is a flat list (reading it does not walk a chain)", () => {
    const input = { l: Array.from({ length: 3000 }, (_, i) => i) };
    const run = withBudget(1e12, () => compileMetered("input.l.map(x, x * 2.0)[2999] + input.l.filter(x, x > 0.0)[2998]")({ input, additional_metadata: {} }));
    expect(run.value).toBe(5998 + 2999);
  });

  it("refuses matches() and message construction at compile time", () => {
    expect(() => compileMetered("input.s.matches('a{1000}')")).toThrow(ForbiddenConstruct);
    expect(() => compileMetered("google.protobuf.Value{string_value: 'x'} == input.s")).toThrow(ForbiddenConstruct);
  });

  it("jsonDepth counts nesting outside strings", () => {
    const depth = (s: string) => jsonDepth(new TextEncoder().encode(s));
    expect(depth("{}")).toBe(1);
    expect(depth('{"a":[[1],{"b":[]}]}')).toBe(4);
    expect(depth('{"a":"[[[[\\"[[["}')).toBe(1);
    expect(depth("[".repeat(40) + "]".repeat(40))).toBe(40);
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => {
      const text = JSON.stringify(v);
      const measured = (x: unknown): number => (typeof x === "object" && x !== null ? 1 + Math.max(0, ...Object.values(x).map(measured)) : 0);
      expect(depth(text)).toBe(measured(v));
    }), { seed: 3, numRuns: 300 });
  });
});
