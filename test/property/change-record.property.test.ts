/**
 * The change record round-trips exactly: for arbitrary effects of every kind of
 * effects.ts, `decodeTurn(encodeTurn(queue, effects))` is strictly equal to what went in
 * (every field, optional ones absent or present as they were, the full ranges of the
 * types the proto gives them).
 *
 * Coverage is not left to chance: the arbitraries are one table with a key per effect
 * kind (its type fails to compile without a new kind), each kind is also checked on its
 * own, and the kinds of that table, of the codec and of the proto's `Effect.kind` must be
 * the same set, so a kind added to effects.ts without a codec or a proto case fails here.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EffectSchema } from "../../src/gen/conveyor/changelog/v1/change_record_pb.js";
import { ATTEMPT_OUTCOMES } from "../../src/grains/queue/attempts.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import { STRATEGIES, type TaskRule } from "../../src/grains/queue/rules.js";
import type { ScheduleState, TaskTemplate } from "../../src/grains/queue/schedule.js";
import { TASK_STATES, type NewTask, type TaskIndexEntry } from "../../src/grains/queue/task.js";
import { RECORDED_KINDS, decodeTurn, encodeTurn } from "../../src/changelog/change-record.js";

type Kind = Effect["kind"];
type EffectOf<K extends Kind> = Extract<Effect, { kind: K }>;

/** Plain objects, as the grain makes them (fast-check may otherwise give null-prototype ones, which toStrictEqual tells apart). */
const rec = <T>(model: { [K in keyof T]: fc.Arbitrary<T[K]> }): fc.Arbitrary<T> => fc.record(model, { noNullPrototype: true });

// Values in the whole range of the proto type each field travels as.
const text = fc.string({ unit: "binary", maxLength: 12 });
const int64 = fc.maxSafeInteger();
const uint32 = fc.integer({ min: 0, max: 0xffff_ffff });
const bytes = fc.uint8Array({ maxLength: 24 });
const metadata = fc.dictionary(text, text, { maxKeys: 4, noNullPrototype: true });

const rule: fc.Arbitrary<TaskRule> = rec({ ruleId: text, key: text, maxRuns: int64, strategy: fc.constantFrom(...STRATEGIES) });
const rules = fc.array(rule, { maxLength: 3 });

const entry: fc.Arbitrary<TaskIndexEntry> = rec({
  id: text, state: fc.constantFrom(...TASK_STATES), type: text, priority: uint32, seq: int64, concurrencyKey: text, readyAtMs: int64,
  timeoutMs: int64, deadlineAtMs: int64, expiresAtMs: int64, uniqueKey: text, uniqueUntilMs: int64, retried: uint32, maxRetry: uint32,
  backoffBaseMs: int64, backoffMaxMs: int64, leaseId: text, leaseExpiresAtMs: int64, attemptEndsAtMs: int64,
  attemptStartedAtMs: int64, attemptWorker: text, attemptNumber: uint32, group: text, batchId: text, rules, payloadBytes: int64,
});

/** The fields a new task shares with a schedule's template. */
const taskBody = {
  queue: text, type: text, payload: bytes, contentType: text, metadata, priority: uint32, maxRetry: uint32, timeoutMs: int64,
  retentionMs: int64, concurrencyKey: text, group: text, backoffBaseMs: int64, backoffMaxMs: int64, rules, ruleError: text,
};

const newTask: fc.Arbitrary<NewTask> = rec({
  ...taskBody, id: text, idChosen: fc.boolean(), deadlineAtMs: int64, processAtMs: int64, uniqueKey: text, uniqueTtlMs: int64,
  expiresAtMs: int64,
});

const template: fc.Arbitrary<TaskTemplate> = rec({ ...taskBody, processInMs: int64, expiresInMs: int64 });

const schedule: fc.Arbitrary<ScheduleState> = rec({
  name: text, task: template,
  cadence: fc.oneof(
    rec({ kind: fc.constant("cron" as const), expression: text, timeZone: text }),
    rec({ kind: fc.constant("interval" as const), everyMs: int64, anchorMs: int64 }),
  ),
  missed: fc.constantFrom("latest" as const, "skip" as const), skipIfRunning: fc.boolean(), paused: fc.boolean(),
  createdAtMs: int64, updatedAtMs: int64, lastTickAtMs: int64, lastTaskId: text,
});

/** `number | undefined` with the key always present (as the effect types have it). */
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

const withEntry = <K extends Kind>(kind: K) => rec({ kind: fc.constant(kind), entry }) as unknown as fc.Arbitrary<EffectOf<K>>;
const failure = rec({ lastError: text, lastFailedAtMs: int64 });

/** One arbitrary per effect kind. */
const EFFECTS: { [K in Kind]: fc.Arbitrary<EffectOf<K>> } = {
  insert: rec({ kind: fc.constant("insert"), task: newTask, entry, createdAtMs: int64 }),
  activate: withEntry("activate"),
  complete: rec({ kind: fc.constant("complete"), entry, outcome: rec({ finishedAtMs: int64, result: bytes }) }),
  retry: rec({ kind: fc.constant("retry"), entry, outcome: failure }),
  requeue: rec({ kind: fc.constant("requeue"), entry, outcome: failure }),
  release: withEntry("release"),
  promote: withEntry("promote"),
  fireGroup: withEntry("fireGroup"),
  revive: withEntry("revive"),
  archive: rec({
    kind: fc.constant("archive"), entry,
    // lastFailedAtMs is absent (not undefined) when no attempt failed.
    outcome: fc.record({ lastError: text, lastFailedAtMs: int64, finishedAtMs: int64 }, { requiredKeys: ["lastError", "finishedAtMs"], noNullPrototype: true }),
  }),
  cancel: rec({ kind: fc.constant("cancel"), entry, outcome: rec({ finishedAtMs: int64, cancelReason: text }) }),
  delete: rec({ kind: fc.constant("delete"), id: text }),
  // A stack is absent when the worker sent none (never ""), as the core writes it.
  recordAttempt: fc.record({
    kind: fc.constant("recordAttempt" as const), taskId: text, number: uint32, startedAtMs: int64, endedAtMs: int64, workerId: text,
    leaseId: text, outcome: fc.constantFrom(...ATTEMPT_OUTCOMES), error: text, stack: fc.string({ unit: "binary", minLength: 1, maxLength: 40 }),
  }, { noNullPrototype: true, requiredKeys: ["kind", "taskId", "number", "startedAtMs", "endedAtMs", "workerId", "leaseId", "outcome", "error"] }),
  setPaused: rec({ kind: fc.constant("setPaused"), paused: fc.boolean(), atMs: int64 }),
  setKeyLimit: rec({ kind: fc.constant("setKeyLimit"), limit: maybe(int64), atMs: int64 }),
  setRateLimit: rec({
    kind: fc.constant("setRateLimit"), spec: maybe(rec({ ratePerSec: fc.double(), burst: uint32 })), atMs: int64,
  }),
  setGroupConfig: rec({
    kind: fc.constant("setGroupConfig"), group: text, config: rec({ maxSize: uint32, maxDelayMs: int64, graceMs: int64 }), atMs: int64,
  }),
  deleteGroupConfig: rec({ kind: fc.constant("deleteGroupConfig"), group: text }),
  setSlotLimit: rec({ kind: fc.constant("setSlotLimit"), slot: text, limit: maybe(int64) }),
  clearSlotLimits: fc.constant({ kind: "clearSlotLimits" }),
  deleteQueue: fc.constant({ kind: "deleteQueue" }),
  setSchedule: rec({ kind: fc.constant("setSchedule"), schedule }),
  deleteSchedule: rec({ kind: fc.constant("deleteSchedule"), name: text }),
  tickSchedule: rec({ kind: fc.constant("tickSchedule"), name: text, lastTickAtMs: int64, lastTaskId: text }),
};

const KINDS = Object.keys(EFFECTS) as Kind[];
const anyEffect: fc.Arbitrary<Effect> = fc.oneof(...KINDS.map((k) => EFFECTS[k] as fc.Arbitrary<Effect>));
const queue = fc.string({ unit: "binary", minLength: 1, maxLength: 16 });

function roundTrips(q: string, effects: Effect[]): void {
  expect(decodeTurn(encodeTurn(q, effects))).toStrictEqual({ queue: q, effects });
}

describe("change record", () => {
  it("the arbitraries, the codec and the proto know the same effect kinds", () => {
    const protoCases = EffectSchema.oneofs[0]!.fields.map((f) => f.localName);
    expect([...RECORDED_KINDS].sort()).toEqual([...KINDS].sort());
    expect([...protoCases].sort()).toEqual([...KINDS].sort());
    expect(KINDS).toHaveLength(24);
  });

  it.each(KINDS)("a %s effect round-trips exactly", (kind) => {
    fc.assert(fc.property(queue, EFFECTS[kind] as fc.Arbitrary<Effect>, (q, effect) => roundTrips(q, [effect])), { seed: 14, numRuns: 150 });
  });

  it("a turn of any effects, in any order, round-trips exactly", () => {
    fc.assert(fc.property(queue, fc.array(anyEffect, { maxLength: 12 }), roundTrips), { seed: 1414, numRuns: 300 });
  });
});
