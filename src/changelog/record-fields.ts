/**
 * The scalar conversions of the change record (change_record.proto) and how a decoding
 * fault names its field: int64 ↔ number, and the enums back to the grain's names (the
 * task state and strategy ones are rpc/wire-names.ts's, the one derivation of them).
 *
 * Why a path: a record that does not decode stops a standby, and the operator reading
 * why needs to know which value of which effect is wrong, not only that one is. Decoders
 * throw a `FieldFault` naming the field; `at` prefixes the enclosing field's name on the
 * way out, and the record's decoder adds which effect it was.
 */
import { MissedTicks as WireMissed } from "../gen/conveyor/v1/admin_service_pb.js";
import type { LimitStrategy, TaskState as WireState } from "../gen/conveyor/v1/task_pb.js";
import { ATTEMPT_OUTCOMES, type AttemptOutcome } from "../grains/queue/attempts.js";
import type { Strategy } from "../grains/queue/rules.js";
import type { MissedTicks } from "../grains/queue/schedule.js";
import type { TaskState } from "../grains/queue/task.js";
import { stateFromWire, strategyFromWire } from "../rpc/wire-names.js";

/** A value of a record that does not decode: the path of its field and what is wrong. */
export class FieldFault extends Error {
  constructor(readonly path: string, readonly problem: string) {
    super(`${path}: ${problem}`);
    this.name = "FieldFault";
  }
}

/** Runs `decode` for the field `name`, so that a fault inside it is named by its full path. */
export function at<T>(name: string, decode: () => T): T {
  try {
    return decode();
  } catch (error) {
    if (error instanceof FieldFault) throw new FieldFault(`${name}.${error.path}`, error.problem);
    throw error;
  }
}

/** A sub-message every record of this kind has (proto3 cannot say "required"), decoded. */
export function need<M, T>(message: M | undefined, name: string, decode: (m: M) => T): T {
  if (message === undefined) throw new FieldFault(name, "is missing");
  return at(name, () => decode(message));
}

/**
 * A number the grain holds as an int64. Only safe integers travel: a fraction or a value
 * beyond 2^53 would not come back as the same number, so it is refused when encoding
 * (a bug in whatever made it) rather than stored altered.
 */
export function int64(value: number): bigint {
  if (!Number.isSafeInteger(value)) throw new RangeError(`${value} is not an integer of at most 2^53 (an int64 field of the change record)`);
  return BigInt(value);
}

/** An int64 back as a number; `name` names the field if it does not fit. */
export function num(value: bigint, name: string): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new FieldFault(name, `${value} is beyond ±2^53 (no number of this build holds it exactly)`);
  }
  return Number(value);
}

export function stateIn(state: WireState, name = "state"): TaskState {
  const s = stateFromWire(state);
  if (s === undefined) throw new FieldFault(name, `${state} is not a task state this build knows`);
  return s;
}

export function strategyIn(strategy: LimitStrategy, name = "strategy"): Strategy {
  const s = strategyFromWire(strategy);
  if (s === undefined) throw new FieldFault(name, `${strategy} is not a concurrency strategy this build knows`);
  return s;
}

/** The grain's names of the public MissedTicks enum (checked complete by its type). */
const MISSED_OUT: Record<MissedTicks, WireMissed> = { latest: WireMissed.LATEST, skip: WireMissed.SKIP };

export const missedOut = (missed: MissedTicks): WireMissed => MISSED_OUT[missed];

export function missedIn(missed: WireMissed, name = "missed"): MissedTicks {
  const found = (Object.keys(MISSED_OUT) as MissedTicks[]).find((m) => MISSED_OUT[m] === missed);
  if (found === undefined) throw new FieldFault(name, `${missed} is not a missed-ticks policy this build knows`);
  return found;
}

/** An attempt outcome travels as its name (as in the public Attempt.outcome); one list, the grain's. */
export function outcomeIn(outcome: string, name = "outcome"): AttemptOutcome {
  if (!(ATTEMPT_OUTCOMES as readonly string[]).includes(outcome)) {
    throw new FieldFault(name, `${JSON.stringify(outcome)} is not an attempt outcome this build knows`);
  }
  return outcome as AttemptOutcome;
}
