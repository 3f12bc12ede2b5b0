/**
 * One list per fact: the task states and the concurrency strategies are listed once in the
 * grain (`TASK_STATES`, `STRATEGIES`) and once in the proto (the wire enums, which
 * `rpc/wire-names.ts` derives its names from). TypeScript code imports them; the lists that
 * cannot import them (SQL text in src/storage, the dashboard's plain JS) are read here and
 * checked against them, as are the other facts that used to be written twice.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { ConveyorError, type ErrorCode } from "../../src/base/errors.js";
import { StateCountsSchema } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskState as WireState } from "../../src/gen/conveyor/v1/task_pb.js";
import { STRATEGIES } from "../../src/grains/queue/rules.js";
import { FINISHED_STATES, TASK_STATES } from "../../src/grains/queue/task.js";
import { DEFAULT_ADDRESS } from "../../src/rpc/client.js";
import { errorCodeOf, fromItemError, grpcCodeOf, toItemError } from "../../src/rpc/status.js";
import { STRATEGY_NAMES, TASK_STATE_NAMES, stateFromWire, stateToWire } from "../../src/rpc/wire-names.js";
import { stateName } from "../../src/sdk/task.js";
import { DEFAULT_CONFIG } from "../../src/server/config.js";
import { DEFAULT_SERVER } from "../../cli/context.js";
import { REPO_ROOT } from "../support/node-process.js";

const UNFINISHED_STATES = TASK_STATES.filter((s) => !FINISHED_STATES.has(s));
const read = (path: string) => readFileSync(join(REPO_ROOT, path), "utf8");
/** The string literals of a JS array literal `const NAME = [ ... ];`. */
function jsArray(text: string, name: string): string[] {
  const m = new RegExp(`(?:const|let)\\s+${name}\\s*=\\s*\\[([\\s\\S]*?)\\];`).exec(text);
  if (!m) throw new Error(`no array ${name}`);
  return [...m[1]!.matchAll(/"([^"]*)"/g)].map((x) => x[1]!);
}

describe("task states: one list", () => {
  it("the grain's list is the proto enum's, in the same order", () => {
    expect(TASK_STATE_NAMES).toEqual(TASK_STATES);
    expect(TASK_STATES.map(stateToWire)).toEqual(TASK_STATES.map((_, i) => i + 1));
    for (const s of TASK_STATES) expect(stateFromWire(stateToWire(s))).toBe(s);
    expect(stateFromWire(WireState.UNSPECIFIED)).toBeUndefined();
  });

  it("StateCounts (admin_service.proto) has one field per state, named as the state", () => {
    expect(StateCountsSchema.fields.map((f) => f.localName)).toEqual(TASK_STATES);
  });

  it("every state list in the SQL text of src/storage is the unfinished states", () => {
    const lists = readdirSync(join(REPO_ROOT, "src/storage"))
      .filter((f) => f.endsWith(".ts"))
      .flatMap((f) => [...read(`src/storage/${f}`).matchAll(/\(\s*('[a-z]+'(?:\s*,\s*'[a-z]+')+)\s*\)/g)].map((m) => ({ f, list: m[1]! })))
      .filter(({ list }) => list.split(",").some((s) => TASK_STATES.includes(s.trim().slice(1, -1) as never)));
    expect(lists.length).toBeGreaterThanOrEqual(2); // admin-queries' counts and stats (unfinished-rows derives its list from TASK_STATES)
    for (const { f, list } of lists) {
      expect([...list.matchAll(/'([a-z]+)'/g)].map((m) => m[1]).sort(), f).toEqual([...UNFINISHED_STATES].sort());
    }
  });

  it("the dashboard lists exactly the states, and the unfinished ones, in order", () => {
    const format = read("web/js/format.js");
    expect(jsArray(format, "STATES")).toEqual(TASK_STATES);
    expect(jsArray(format, "UNFINISHED")).toEqual(UNFINISHED_STATES);
  });

  it("the SDK says \"unknown\" for a state it does not know, never guesses one", () => {
    expect(stateName(WireState.ACTIVE)).toBe("active");
    expect(stateName(99 as WireState)).toBe("unknown");
    expect(stateName(WireState.UNSPECIFIED)).toBe("unknown");
  });
});

describe("concurrency strategies: one list", () => {
  it("the grain's list is the proto enum's, in the same order", () => {
    expect(STRATEGY_NAMES).toEqual(STRATEGIES);
  });

  it("the dashboard's strategy picker lists them in enum order with their wire names", () => {
    const text = read("web/js/tabs/strategies.js");
    const block = /const STRATEGIES = \[([\s\S]*?)\n\];/.exec(text)![1]!;
    expect([...block.matchAll(/name: "([A-Z_]+)"/g)].map((m) => m[1])).toEqual(STRATEGIES);
    expect([...block.matchAll(/value: "([A-Z_]+)"/g)].map((m) => m[1])).toEqual(STRATEGIES.map((s) => `LIMIT_STRATEGY_${s}`));
  });
});

describe("errors: one code table, one item-error mapping", () => {
  const codes: ErrorCode[] = ["INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "UNAUTHENTICATED", "PERMISSION_DENIED", "INTERNAL"];

  it("every code maps to its gRPC status and back", () => {
    for (const c of codes) expect(errorCodeOf(grpcCodeOf(c))).toBe(c);
    expect(grpcCodeOf("UNAVAILABLE")).toBe(grpc.status.UNAVAILABLE);
  });

  it("a batch item's error keeps code, reason, message and field", () => {
    const e = new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", "tasks[2].priority: too big", "tasks[2].priority");
    const back = fromItemError(toItemError(e));
    expect([back.code, back.reason, back.message, back.field]).toEqual([e.code, e.reason, e.message, e.field]);
    expect(fromItemError(undefined).code).toBe("INTERNAL");
  });
});

describe("the default address: one constant", () => {
  it("the node listens where the SDK and the CLI dial", () => {
    expect(DEFAULT_CONFIG.listen).toBe(DEFAULT_ADDRESS);
    expect(DEFAULT_SERVER).toBe(DEFAULT_ADDRESS);
  });
});
