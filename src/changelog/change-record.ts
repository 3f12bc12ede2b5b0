/**
 * The changelog's record of one grain turn (issue 14): the turn's named effects on one
 * queue as a versioned protobuf (proto/conveyor/changelog/v1/change_record.proto), the
 * same effects the owner's store applied, so that a standby or a new owner applies them
 * through the same store code (TaskStore.apply) and holds the same rows. The log itself
 * keeps records as opaque bytes (changelog.ts); this is the layer above.
 *
 * `decodeTurn(encodeTurn(q, effects))` gives back `q` and effects deep-equal to
 * `effects` (test/property/change-record.property.test.ts), and applying the decoded
 * turns to an empty database reproduces the owner's rows
 * (test/unit/change-record-replay.test.ts).
 *
 * Each effect kind has its one pair of conversions in `KINDS`, typed so that a kind of
 * effects.ts without one does not compile; the property test also checks that the
 * proto's `Effect.kind` has a case for each kind and no other.
 */
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import type { GenMessage } from "@bufbuild/protobuf/codegenv2";
import { ChangeRecordSchema, type Effect as WireEffect, type TaskEntry as WireEntry } from "../gen/conveyor/changelog/v1/change_record_pb.js";
import type { Effect } from "../grains/queue/effects.js";
import type { TaskIndexEntry } from "../grains/queue/task.js";
import { FieldFault, int64, need, num, outcomeIn } from "./record-fields.js";
import {
  entryIn, entryOut, groupConfigIn, groupConfigOut, newTaskIn, newTaskOut, rateLimitIn, rateLimitOut, scheduleIn, scheduleOut,
} from "./record-values.js";

/**
 * The format version this build writes and the newest it reads. Raise it when adding
 * what an older reader must not ignore (an effect kind, a field a statement writes; see
 * the proto's header), never for anything else.
 */
export const CHANGE_RECORD_VERSION = 1;

/** A record that cannot be decoded (or a turn that cannot be encoded); the message says what is wrong. */
export class ChangeRecordError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ChangeRecordError";
  }
}

export interface DecodedTurn {
  queue: string;
  effects: Effect[];
}

export function encodeTurn(queue: string, effects: readonly Effect[]): Uint8Array {
  const wire = effects.map((effect, i) => {
    try {
      return { kind: { case: effect.kind, value: KINDS[effect.kind].out(effect as never) } } as MessageInitShape<GenMessage<WireEffect>>;
    } catch (error) {
      throw new ChangeRecordError(`cannot record effects[${i}] (${effect.kind}) of queue ${JSON.stringify(queue)}: ${messageOf(error)}`, { cause: error });
    }
  });
  try {
    return toBinary(ChangeRecordSchema, create(ChangeRecordSchema, { version: CHANGE_RECORD_VERSION, queue, effects: wire }));
  } catch (error) {
    // protobuf-es names the field whose value its type cannot hold (a negative uint32).
    throw new ChangeRecordError(`cannot record a turn of queue ${JSON.stringify(queue)}: ${messageOf(error)}`, { cause: error });
  }
}

/** The turn a record holds; throws ChangeRecordError naming what is wrong with one that is not a record this build can apply. */
export function decodeTurn(bytes: Uint8Array): DecodedTurn {
  const fail = (why: string, cause?: unknown) =>
    new ChangeRecordError(`not a change record this build can apply (${bytes.byteLength} bytes): ${why}`, cause === undefined ? undefined : { cause });
  let record;
  try {
    record = fromBinary(ChangeRecordSchema, bytes);
  } catch (error) {
    throw fail(`its bytes are not a ChangeRecord message (${messageOf(error)})`, error);
  }
  if (record.version === 0) throw fail("it has no format version");
  if (record.version > CHANGE_RECORD_VERSION) {
    throw fail(`it is format version ${record.version} and this build reads up to ${CHANGE_RECORD_VERSION} (a newer node wrote it: run a build that knows it)`);
  }
  if (record.queue === "") throw fail("it names no queue");
  const effects = record.effects.map((w, i) => {
    const { kind } = w;
    const where = `effects[${i}]` + (kind.case === undefined ? "" : ` (${kind.case})`);
    if (kind.case === undefined) throw fail(`${where} is of a kind this build does not know (a newer writer that did not raise the version?)`);
    try {
      return KINDS[kind.case].in(kind.value as never);
    } catch (error) {
      if (error instanceof FieldFault) throw fail(`${where}.${error.message} (queue ${JSON.stringify(record.queue)})`, error);
      throw error;
    }
  });
  return { queue: record.queue, effects };
}

type Kind = Effect["kind"];
type EffectOf<K extends Kind> = Extract<Effect, { kind: K }>;
/** The proto message of effect kind K: the value of the `Effect.kind` case of the same name. */
type WireOf<K extends Kind> = Extract<WireEffect["kind"], { case: K }>["value"];

interface KindCodec<K extends Kind> {
  out(effect: EffectOf<K>): MessageInitShape<GenMessage<WireOf<K>>>;
  in(wire: WireOf<K>): EffectOf<K>;
}

/** The transitions that carry their task's entry and nothing else. */
type EntryOnly = "activate" | "release" | "promote" | "fireGroup" | "revive";

function entryOnly<K extends EntryOnly>(kind: K): KindCodec<K> {
  // One shape for five kinds; TypeScript cannot see that through the generic K.
  return {
    out: (e: { entry: TaskIndexEntry }) => ({ entry: entryOut(e.entry) }),
    in: (w: { entry?: WireEntry }) => ({ kind, entry: need(w.entry, "entry", entryIn) }),
  } as unknown as KindCodec<K>;
}

/** The transitions of a failed attempt: the entry and the failure. */
function failure<K extends "retry" | "requeue">(kind: K): KindCodec<K> {
  // One shape for two kinds (as entryOnly).
  return {
    out: (e: EffectOf<"retry">) => ({ entry: entryOut(e.entry), lastError: e.outcome.lastError, lastFailedAtMs: int64(e.outcome.lastFailedAtMs) }),
    in: (w: WireOf<"retry">) => ({
      kind, entry: need(w.entry, "entry", entryIn),
      outcome: { lastError: w.lastError, lastFailedAtMs: num(w.lastFailedAtMs, "lastFailedAtMs") },
    }),
  } as unknown as KindCodec<K>;
}

/** Every effect kind, each with its conversions (see the header). */
const KINDS: { [K in Kind]: KindCodec<K> } = {
  insert: {
    out: (e) => ({ task: newTaskOut(e.task), entry: entryOut(e.entry), createdAtMs: int64(e.createdAtMs) }),
    in: (w) => ({
      kind: "insert", task: need(w.task, "task", newTaskIn), entry: need(w.entry, "entry", entryIn),
      createdAtMs: num(w.createdAtMs, "createdAtMs"),
    }),
  },
  activate: entryOnly("activate"),
  complete: {
    out: (e) => ({ entry: entryOut(e.entry), finishedAtMs: int64(e.outcome.finishedAtMs), result: e.outcome.result }),
    in: (w) => ({
      kind: "complete", entry: need(w.entry, "entry", entryIn),
      outcome: { finishedAtMs: num(w.finishedAtMs, "finishedAtMs"), result: w.result },
    }),
  },
  retry: failure("retry"),
  requeue: failure("requeue"),
  release: entryOnly("release"),
  promote: entryOnly("promote"),
  fireGroup: entryOnly("fireGroup"),
  revive: entryOnly("revive"),
  archive: {
    out: (e) => ({
      entry: entryOut(e.entry), lastError: e.outcome.lastError, finishedAtMs: int64(e.outcome.finishedAtMs),
      ...(e.outcome.lastFailedAtMs !== undefined ? { lastFailedAtMs: int64(e.outcome.lastFailedAtMs) } : {}),
    }),
    in: (w) => ({
      kind: "archive", entry: need(w.entry, "entry", entryIn),
      outcome: {
        lastError: w.lastError, finishedAtMs: num(w.finishedAtMs, "finishedAtMs"),
        ...(w.lastFailedAtMs !== undefined ? { lastFailedAtMs: num(w.lastFailedAtMs, "lastFailedAtMs") } : {}),
      },
    }),
  },
  cancel: {
    out: (e) => ({ entry: entryOut(e.entry), finishedAtMs: int64(e.outcome.finishedAtMs), cancelReason: e.outcome.cancelReason }),
    in: (w) => ({
      kind: "cancel", entry: need(w.entry, "entry", entryIn),
      outcome: { finishedAtMs: num(w.finishedAtMs, "finishedAtMs"), cancelReason: w.cancelReason },
    }),
  },
  delete: {
    out: (e) => ({ id: e.id }),
    in: (w) => ({ kind: "delete", id: w.id }),
  },
  recordAttempt: {
    out: (e) => ({
      taskId: e.taskId, number: e.number, startedAtMs: int64(e.startedAtMs), endedAtMs: int64(e.endedAtMs), workerId: e.workerId,
      leaseId: e.leaseId, outcome: e.outcome, error: e.error, stack: e.stack ?? "",
    }),
    in: (w) => ({
      kind: "recordAttempt", taskId: w.taskId, number: w.number, startedAtMs: num(w.startedAtMs, "startedAtMs"),
      endedAtMs: num(w.endedAtMs, "endedAtMs"), workerId: w.workerId, leaseId: w.leaseId, outcome: outcomeIn(w.outcome), error: w.error,
      ...(w.stack ? { stack: w.stack } : {}),
    }),
  },
  setPaused: {
    out: (e) => ({ paused: e.paused, atMs: int64(e.atMs) }),
    in: (w) => ({ kind: "setPaused", paused: w.paused, atMs: num(w.atMs, "atMs") }),
  },
  setKeyLimit: {
    out: (e) => ({ ...(e.limit !== undefined ? { limit: int64(e.limit) } : {}), atMs: int64(e.atMs) }),
    in: (w) => ({ kind: "setKeyLimit", limit: w.limit === undefined ? undefined : num(w.limit, "limit"), atMs: num(w.atMs, "atMs") }),
  },
  setRateLimit: {
    out: (e) => ({ ...(e.spec !== undefined ? { spec: rateLimitOut(e.spec) } : {}), atMs: int64(e.atMs) }),
    in: (w) => ({ kind: "setRateLimit", spec: w.spec === undefined ? undefined : rateLimitIn(w.spec), atMs: num(w.atMs, "atMs") }),
  },
  setGroupConfig: {
    out: (e) => ({ group: e.group, config: groupConfigOut(e.config), atMs: int64(e.atMs) }),
    in: (w) => ({ kind: "setGroupConfig", group: w.group, config: need(w.config, "config", groupConfigIn), atMs: num(w.atMs, "atMs") }),
  },
  deleteGroupConfig: {
    out: (e) => ({ group: e.group }),
    in: (w) => ({ kind: "deleteGroupConfig", group: w.group }),
  },
  setSlotLimit: {
    out: (e) => ({ slot: e.slot, ...(e.limit !== undefined ? { limit: int64(e.limit) } : {}) }),
    in: (w) => ({ kind: "setSlotLimit", slot: w.slot, limit: w.limit === undefined ? undefined : num(w.limit, "limit") }),
  },
  clearSlotLimits: {
    out: () => ({}),
    in: () => ({ kind: "clearSlotLimits" }),
  },
  deleteQueue: {
    out: () => ({}),
    in: () => ({ kind: "deleteQueue" }),
  },
  setSchedule: {
    out: (e) => ({ schedule: scheduleOut(e.schedule) }),
    in: (w) => ({ kind: "setSchedule", schedule: need(w.schedule, "schedule", scheduleIn) }),
  },
  deleteSchedule: {
    out: (e) => ({ name: e.name }),
    in: (w) => ({ kind: "deleteSchedule", name: w.name }),
  },
  tickSchedule: {
    out: (e) => ({ name: e.name, lastTickAtMs: int64(e.lastTickAtMs), lastTaskId: e.lastTaskId }),
    in: (w) => ({ kind: "tickSchedule", name: w.name, lastTickAtMs: num(w.lastTickAtMs, "lastTickAtMs"), lastTaskId: w.lastTaskId }),
  },
};

/** The effect kinds this build records: every kind of effects.ts (KINDS' type makes sure). */
export const RECORDED_KINDS = Object.keys(KINDS) as Kind[];

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
