/**
 * Metered CEL: concurrency-rule expressions run under a cost budget, so that no rule and
 * no payload can keep the event loop busy for long. @bufbuild/cel 0.6.1 has no cost
 * limit of its own (it evaluates whatever it is given, to the end), so the budget is
 * kept here, through the library's public extension points: the functions of the
 * environment, and the parsed expression, which is rewritten before it is planned.
 *
 * The cost of an evaluation is counted where its work grows with data:
 * - a function call costs 1 plus the size of its arguments (a string's characters, a
 *   list's or map's elements counted deeply; a call with an IANA time zone costs
 *   TIME_ZONE_COST more: it builds an Intl formatter);
 * - a comprehension (all, exists, exists_one, map, filter) costs, before it starts, its
 *   range's size times the size of its body, plus the range's deep size;
 * - reading a field or an index of a map costs the map's size (the library converts a
 *   JSON object to a map at every read, and scans a map for a missing numeric key).
 * Once an evaluation has spent its budget, calls and comprehensions fail at once
 * without doing their work, every loop ends, and the result is the budget error.
 *
 * Two library behaviours are changed because their cost does not follow their inputs:
 * list concatenation (the `map` and `filter` macros build their result one `+` at a
 * time) gives a flat list instead of a chain of views that every later read walks; and
 * `matches` is not available (compiling the 7-character pattern `a{1000}` takes 100 ms).
 * Protobuf message construction is refused too: rules have no use for it, and it
 * converts values outside any function call.
 */
import {
  CelScalar,
  celEnv,
  celError,
  celFunc,
  celList,
  isCelList,
  isCelMap,
  listType,
  parse,
  plan,
  type CelError,
  type CelFunc,
  type CelResult,
  type CelValue,
} from "@bufbuild/cel";

/** The parsed form of an expression (the library's ParsedExpr). */
type Parsed = ReturnType<typeof parse>;
type Expr = Parsed["expr"];

/** A compiled rule expression: `input` is the parsed JSON payload, `additional_metadata` the metadata. */
export type MeteredProgram = (vars: { input: unknown; additional_metadata: Record<string, string> }) => CelResult;

/** What a call with an IANA time zone argument costs on top (it builds an Intl.DateTimeFormat, ~20 µs). */
const TIME_ZONE_COST = 200;

/** The budget of the evaluation running now (evaluation is synchronous: one at a time). */
interface Meter {
  spent: number;
  limit: number;
  exceeded: boolean;
  /** Returned by everything once the budget is spent: one error, so that failing stays cheap. */
  error: CelError;
}
let meter: Meter | undefined;

const exceeded = () => meter?.exceeded === true;
const spentError = (): CelError => meter!.error;
/** How many units the running evaluation may still spend (no evaluation: unbounded). */
const remaining = () => (meter ? meter.limit - meter.spent : Infinity);

/** Adds `units` to the running evaluation's cost; false (and spent) once it passes its budget. */
function charge(units: number): boolean {
  const m = meter;
  if (!m) return true;
  m.spent += units;
  if (m.spent > m.limit) m.exceeded = true;
  return !m.exceeded;
}

const weights = new WeakMap<object, number>();

/**
 * What a list or map counts for before its elements: the library converts a JSON array
 * or object into a new list or map at every read, and a map's conversion (a Map of its
 * entries) costs about as much as ten scalar operations.
 */
const LIST_BASE = 4;
const MAP_BASE = 10;

/**
 * The size a value counts for: a string's characters, bytes, and for lists and maps a
 * base plus the weights of their elements (keys and values); scalars count 1. The walk stops
 * once it passes `cap` (the answer is then > cap), so measuring never costs more than
 * the budget left. Complete weights are cached per list or map.
 */
export function weight(v: unknown, cap = Infinity): number {
  if (typeof v === "string") return v.length + 1;
  if (v instanceof Uint8Array) return v.length + 1;
  if (typeof v !== "object" || v === null || (!isCelList(v) && !isCelMap(v))) return 1;
  const cached = weights.get(v);
  if (cached !== undefined) return cached;
  let w = isCelList(v) ? LIST_BASE : MAP_BASE;
  if (isCelList(v)) {
    for (const x of v) {
      w += weight(x, cap - w);
      if (w > cap) return w;
    }
  } else {
    for (const [k, x] of v.entries()) {
      w += weight(k) + weight(x, cap - w);
      if (w > cap) return w;
    }
  }
  weights.set(v, w);
  return w;
}

const isTimeZoneCall = (f: CelFunc, args: readonly unknown[]) =>
  f.target?.name === "google.protobuf.Timestamp" && args.length === 1 && typeof args[0] === "string" && /[A-Za-z]/.test(args[0]);

/** A standard function that charges for its arguments before it runs. */
function metered(f: CelFunc): CelFunc {
  const wrapped = Object.create(f) as CelFunc & { call: CelFunc["call"] };
  // size() of a list or map is O(1): only a string's (code points) or bytes' size costs.
  const containersAreFree = f.name === "size";
  wrapped.call = (id, target, args) => {
    if (exceeded()) return spentError();
    // Rules using matches() are refused at registration; this covers rules stored before that.
    if (f.name === "matches") return celError("matches() is not available in concurrency rules", id);
    const result = f.call(id, target, args);
    if (result === undefined) return undefined; // another overload's signature: nothing ran
    // Charged after the call (the library tries overloads in turn; measuring first would
    // measure for every one): a call's work is bounded by its arguments, which earlier
    // charges and the bounded input already paid for.
    const cap = remaining();
    let units = isTimeZoneCall(f, args) ? 1 + TIME_ZONE_COST : 1;
    for (const a of target === undefined ? args : [target, ...args]) {
      units += containersAreFree && (isCelList(a) || isCelMap(a)) ? 1 : weight(a, cap - units);
      if (units > cap) break;
    }
    return charge(units) ? result : spentError();
  };
  return wrapped;
}

const LIST = listType(CelScalar.DYN);

/** `a + b` for lists as one flat list (the library's views make every later read walk the chain). */
const flatListConcat = celFunc("_+_", [LIST, LIST], LIST, (a, b) => {
  if (exceeded() || !charge(1 + a.size + b.size)) throw spentError();
  const out = new Array<CelValue>(a.size + b.size);
  for (let i = 0; i < a.size; i++) out[i] = a.get(i)!;
  for (let i = 0; i < b.size; i++) out[a.size + i] = b.get(i)!;
  return celList(out);
});

const RANGE_FN = "__conveyor_range_cost__";
const ACCESS_FN = "__conveyor_access_cost__";
const CONTINUE_FN = "__conveyor_continue__";

/** Wraps every comprehension range: its size times the body's size, plus its deep size. */
const rangeCost = celFunc(RANGE_FN, [CelScalar.DYN, CelScalar.INT], CelScalar.DYN, (range, bodyWeight) => {
  if (exceeded()) throw spentError();
  const n = isCelList(range) || isCelMap(range) ? range.size : 1;
  const units = 1 + n * Number(bodyWeight);
  if (!charge(units + weight(range, remaining() - units))) throw spentError();
  return range;
});

/** Wraps every comprehension's loop condition: a spent budget ends every loop at once. */
const loopContinue = celFunc(CONTINUE_FN, [CelScalar.BOOL], CelScalar.BOOL, (condition) => condition && !exceeded());

/** Wraps the operand of every field read and index: a map costs its size. */
const accessCost = celFunc(ACCESS_FN, [CelScalar.DYN], CelScalar.DYN, (operand) => {
  if (exceeded() || !charge(isCelMap(operand) ? MAP_BASE + operand.size : 1)) throw spentError();
  return operand;
});

const env = celEnv({ funcs: [...[...celEnv().funcs].map(metered), flatListConcat, rangeCost, loopContinue, accessCost] });

/** Why an expression cannot be a rule: it parses, but uses what rules may not. */
export class ForbiddenConstruct extends Error {}

/** The direct sub-expressions of an expression. */
function children(e: Expr): Expr[] {
  const k = e.exprKind;
  switch (k.case) {
    case "selectExpr":
      return k.value.operand ? [k.value.operand] : [];
    case "callExpr":
      return [...(k.value.target ? [k.value.target] : []), ...k.value.args];
    case "listExpr":
      return k.value.elements;
    case "structExpr":
      return k.value.entries.flatMap((en) => [...(en.keyKind.case === "mapKey" ? [en.keyKind.value] : []), ...(en.value ? [en.value] : [])]);
    case "comprehensionExpr": {
      const c = k.value;
      return [c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result].filter((x): x is Expr => x !== undefined);
    }
    default:
      return [];
  }
}

function countNodes(e: Expr | undefined): number {
  if (!e) return 0;
  let n = 1;
  for (const c of children(e)) n += countNodes(c);
  return n;
}

const INDEXES = new Set(["_[_]", "_[?_]", "_?._"]);

/**
 * Checks what rules may use and adds the cost hooks, in place: every comprehension's
 * range goes through RANGE_FN (with its body's size) and its condition through
 * CONTINUE_FN; every field read and index reads its operand through ACCESS_FN.
 */
function instrument(parsed: Parsed): void {
  let nextId = 1n;
  const walkIds = (e: Expr) => {
    if (e.id >= nextId) nextId = e.id + 1n;
    children(e).forEach(walkIds);
  };
  walkIds(parsed.expr);
  const call = (fn: string, args: Expr[]): Expr => ({
    $typeName: "cel.expr.Expr", id: nextId++,
    exprKind: { case: "callExpr", value: { $typeName: "cel.expr.Expr.Call", function: fn, args } },
  }) as Expr;
  const intConst = (v: number): Expr => ({
    $typeName: "cel.expr.Expr", id: nextId++,
    exprKind: { case: "constExpr", value: { $typeName: "cel.expr.Constant", constantKind: { case: "int64Value", value: BigInt(v) } } },
  }) as Expr;

  const visit = (e: Expr) => {
    const k = e.exprKind;
    if (k.case === "structExpr" && k.value.messageName !== "") {
      throw new ForbiddenConstruct(`constructing a message (${k.value.messageName}) is not available in concurrency rules`);
    }
    if (k.case === "callExpr" && k.value.function === "matches") {
      throw new ForbiddenConstruct("matches() is not available in concurrency rules (the cost of a regular expression does not follow its length); use startsWith, endsWith or contains");
    }
    children(e).forEach(visit);
    if (k.case === "comprehensionExpr" && k.value.iterRange && k.value.loopCondition) {
      const body = 1 + countNodes(k.value.loopCondition) + countNodes(k.value.loopStep);
      k.value.iterRange = call(RANGE_FN, [k.value.iterRange, intConst(body)]);
      k.value.loopCondition = call(CONTINUE_FN, [k.value.loopCondition]);
    }
    if (k.case === "selectExpr" && k.value.operand) k.value.operand = call(ACCESS_FN, [k.value.operand]);
    if (k.case === "callExpr" && INDEXES.has(k.value.function) && k.value.args[0]) {
      k.value.args[0] = call(ACCESS_FN, [k.value.args[0]]);
    }
  };
  visit(parsed.expr);
}

/**
 * Compiles an expression for metered evaluation. Throws the parser's error, or a
 * ForbiddenConstruct naming what rules may not use.
 */
export function compileMetered(source: string): MeteredProgram {
  const parsed = parse(source);
  instrument(parsed);
  return plan(env, parsed) as unknown as MeteredProgram;
}

/** The outcome of running metered programs under one budget. */
export interface Metered<T> {
  value: T;
  spent: number;
  exceeded: boolean;
}

/** Runs `body` (which evaluates metered programs) under a budget of `limit` units. */
export function withBudget<T>(limit: number, body: () => T): Metered<T> {
  const m: Meter = { spent: 0, limit, exceeded: false, error: celError(`evaluation cost more than ${limit} units`) };
  const outer = meter;
  meter = m;
  try {
    const value = body();
    return { value, spent: m.spent, exceeded: m.exceeded };
  } finally {
    meter = outer;
  }
}

/**
 * How deeply JSON text nests (arrays and objects), from its bytes, without parsing it:
 * checked before JSON.parse so that no later walk of the value can recurse deeply.
 */
export function jsonDepth(bytes: Uint8Array): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) max = Math.max(max, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}
