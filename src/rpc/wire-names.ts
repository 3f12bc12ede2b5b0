/**
 * The names the wire enums stand for, derived from the generated enums so that the proto
 * stays the one list: a task state is its `TaskState` enum name in lowercase
 * ("SCHEDULED" ↔ "scheduled"), a concurrency strategy is its `LimitStrategy` enum name.
 * The server, the SDK and the CLI convert through these; the grain's own unions
 * (`TaskState`, `Strategy`) are checked against them at compile time (server/convert.ts,
 * server/rules/rule-wire.ts), and the lists that cannot import them (SQL text, the
 * dashboard's plain JS) by test/unit/one-list-per-fact.test.ts.
 */
import { LimitStrategy, TaskState } from "../gen/conveyor/v1/task_pb.js";

const enumValues = <E extends number>(e: Record<string, string | number>): E[] =>
  Object.values(e).filter((v): v is E => typeof v === "number" && v !== 0);

/** A task state's name: "scheduled", "pending", …, in enum order. */
export type TaskStateName = Lowercase<Exclude<keyof typeof TaskState, "UNSPECIFIED">>;
export const TASK_STATE_NAMES: readonly TaskStateName[] =
  enumValues<TaskState>(TaskState).map((v) => TaskState[v].toLowerCase() as TaskStateName);

const STATE_TO_WIRE = Object.fromEntries(
  TASK_STATE_NAMES.map((n) => [n, TaskState[n.toUpperCase() as Uppercase<TaskStateName>]]),
) as Record<TaskStateName, TaskState>;

export const stateToWire = (name: TaskStateName): TaskState => STATE_TO_WIRE[name];

/** The name of a wire state; undefined for UNSPECIFIED or a value this build does not know. */
export function stateFromWire(state: TaskState): TaskStateName | undefined {
  const name = state === TaskState.UNSPECIFIED ? undefined : TaskState[state];
  return name === undefined ? undefined : (name.toLowerCase() as TaskStateName);
}

/** A concurrency strategy's name: "GROUP_ROUND_ROBIN", …, in enum order. */
export type StrategyName = Exclude<keyof typeof LimitStrategy, "UNSPECIFIED">;
export const STRATEGY_NAMES: readonly StrategyName[] =
  enumValues<LimitStrategy>(LimitStrategy).map((v) => LimitStrategy[v] as StrategyName);

/** UNSPECIFIED for a name outside the list (a plain-JS caller's typo; the server refuses it). */
export const strategyToWire = (name: StrategyName): LimitStrategy =>
  STRATEGY_NAMES.includes(name) ? LimitStrategy[name] : LimitStrategy.UNSPECIFIED;

/** The name of a wire strategy; undefined for UNSPECIFIED or a value this build does not know. */
export function strategyFromWire(strategy: LimitStrategy): StrategyName | undefined {
  return strategy === LimitStrategy.UNSPECIFIED ? undefined : (LimitStrategy[strategy] as StrategyName | undefined);
}
