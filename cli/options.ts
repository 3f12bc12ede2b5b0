/**
 * Argument parsers for commander. Each throws commander's InvalidArgumentError, so a
 * bad value is reported as `error: option '--x <v>' argument 'bad' is invalid. <why>`
 * and nothing is sent to the server.
 */
import { InvalidArgumentError } from "commander";
import { parseDurationMs } from "../src/base/duration.js";
import { TaskState } from "../src/gen/conveyor/v1/task_pb.js";
import { stateFromWire, stateToWire, TASK_STATE_NAMES } from "../src/rpc/wire-names.js";

/** An integer parser accepting min..max; `hint` explains the range in the error. */
export function intArg(min: number, max: number, hint = `must be ${min}..${max}`): (value: string) => number {
  return (value) => {
    const text = value.trim();
    if (!/^[+-]?\d+$/.test(text)) throw new InvalidArgumentError(`not an integer; ${hint}`);
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(hint);
    return n;
  };
}

/** A duration such as 500ms, 30s, 1m30s, 2h (see parseDurationMs), in milliseconds. */
export function durationArg(value: string): number {
  try {
    return parseDurationMs(value);
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
  }
}

/** Like durationArg, but zero is refused (e.g. an RPC deadline). */
export function positiveDurationArg(value: string): number {
  const ms = durationArg(value);
  if (ms <= 0) throw new InvalidArgumentError("must be greater than zero");
  return ms;
}

/** An absolute time in ISO 8601 (e.g. 2030-01-01T09:00:00Z), as Unix epoch milliseconds. */
export function instantArg(value: string): number {
  const ms = Date.parse(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value.trim()) || Number.isNaN(ms)) {
    throw new InvalidArgumentError("not a valid time; use ISO 8601, e.g. 2030-01-01T09:00:00Z");
  }
  return ms;
}

/** Text that must be valid JSON; returned unchanged. */
export function jsonArg(value: string): string {
  try {
    JSON.parse(value);
  } catch (err) {
    throw new InvalidArgumentError(`not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  return value;
}

/** A repeatable key=value option collected into one record. */
export function keyValueArg(value: string, previous: Record<string, string> | undefined): Record<string, string> {
  const eq = value.indexOf("=");
  if (eq <= 0) throw new InvalidArgumentError("expected key=value");
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

/** CLI state names (lowercase) and their wire values: task.proto's TaskState, in enum order. */
export const STATE_BY_NAME: Readonly<Record<string, TaskState>> = Object.fromEntries(TASK_STATE_NAMES.map((n) => [n, stateToWire(n)]));

export const STATE_NAMES: readonly string[] = TASK_STATE_NAMES;

/** The lowercase CLI name of a wire state ("pending"); unknown values print as numbers. */
export function stateName(state: TaskState): string {
  const name = stateFromWire(state);
  if (name) return name;
  return state === TaskState.UNSPECIFIED ? "unspecified" : String(state);
}
