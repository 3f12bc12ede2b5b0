/**
 * What the change record refuses, and how it says so. A record a standby cannot apply
 * exactly stops it, so each refusal must name what is wrong: bytes that are not a record,
 * a format version newer than this build, an effect kind it does not know, a missing
 * part, a value out of range. And a turn whose values the format cannot carry exactly is
 * refused when it is encoded, never stored altered.
 */
import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { CHANGE_RECORD_VERSION, ChangeRecordError, decodeTurn, encodeTurn } from "../../src/changelog/change-record.js";
import { ChangeRecordSchema } from "../../src/gen/conveyor/changelog/v1/change_record_pb.js";
import { TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import { indexEntry } from "../../src/grains/queue/task.js";
import { newTask } from "../support/core-fixtures.js";

const record = (init: MessageInitShape<typeof ChangeRecordSchema>) =>
  toBinary(ChangeRecordSchema, create(ChangeRecordSchema, { version: CHANGE_RECORD_VERSION, queue: "q", ...init }));

function refusal(bytes: Uint8Array): string {
  try {
    decodeTurn(bytes);
  } catch (error) {
    expect(error).toBeInstanceOf(ChangeRecordError);
    return (error as Error).message;
  }
  throw new Error("decoded");
}

const task = newTask({ id: "t1" });
const entry = indexEntry(task, { state: "pending", seq: 1, readyAtMs: 1_000, expiresAtMs: 0, uniqueUntilMs: 0, payloadBytes: 3 });

describe("change record: refusals", () => {
  it("bytes that are not a record", () => {
    expect(refusal(new Uint8Array([0xff, 0xff, 0xff]))).toMatch(/^not a change record this build can apply \(3 bytes\): its bytes are not a ChangeRecord message/);
  });

  it("a record without a version, or of a newer one", () => {
    expect(refusal(record({ version: 0 }))).toMatch(/it has no format version/);
    expect(refusal(record({ version: CHANGE_RECORD_VERSION + 1 }))).toMatch(
      new RegExp(`it is format version ${CHANGE_RECORD_VERSION + 1} and this build reads up to ${CHANGE_RECORD_VERSION}`),
    );
  });

  it("a record naming no queue", () => {
    expect(refusal(record({ queue: "" }))).toMatch(/it names no queue/);
  });

  it("an effect of a kind this build does not know (a field number past the last case)", () => {
    const unknownKind = new BinaryWriter().tag(99, WireType.LengthDelimited).bytes(new Uint8Array()).finish();
    const bytes = new BinaryWriter()
      .tag(1, WireType.Varint).uint32(CHANGE_RECORD_VERSION)
      .tag(2, WireType.LengthDelimited).string("q")
      .tag(3, WireType.LengthDelimited).bytes(unknownKind)
      .finish();
    expect(refusal(bytes)).toMatch(/effects\[0\] is of a kind this build does not know/);
  });

  it("a transition without its entry", () => {
    expect(refusal(record({ effects: [{ kind: { case: "activate", value: {} } }] }))).toMatch(/effects\[0\] \(activate\)\.entry: is missing/);
  });

  it("values this build cannot hold, named by their path", () => {
    const tooBig = record({ effects: [{ kind: { case: "promote", value: { entry: { id: "t1", state: TaskState.PENDING, readyAtMs: 2n ** 60n } } } }] });
    expect(refusal(tooBig)).toMatch(/effects\[0\] \(promote\)\.entry\.readyAtMs: 1152921504606846976 is beyond ±2\^53/);
    const state = record({ effects: [{ kind: { case: "promote", value: { entry: { id: "t1", state: 99 as TaskState } } } }] });
    expect(refusal(state)).toMatch(/effects\[0\] \(promote\)\.entry\.state: 99 is not a task state this build knows/);
    const rule = record({ effects: [{ kind: { case: "promote", value: { entry: { state: TaskState.PENDING, rules: [{ ruleId: "r", strategy: 0 }] } } } }] });
    expect(refusal(rule)).toMatch(/effects\[0\] \(promote\)\.entry\.rules\[0\]\.strategy: 0 is not a concurrency strategy/);
    const outcome = record({ effects: [{ kind: { case: "recordAttempt", value: { taskId: "t1", outcome: "exploded" } } }] });
    expect(refusal(outcome)).toMatch(/effects\[0\] \(recordAttempt\)\.outcome: "exploded" is not an attempt outcome/);
    const cadence = record({ effects: [{ kind: { case: "setSchedule", value: { schedule: { name: "s", task: {} } } } }] });
    expect(refusal(cadence)).toMatch(/effects\[0\] \(setSchedule\)\.schedule\.cadence: is missing/);
  });

  it("a turn whose values the format cannot carry exactly is refused when encoded", () => {
    const fraction: Effect = { kind: "setPaused", paused: true, atMs: 1.5 };
    expect(() => encodeTurn("q", [{ kind: "delete", id: "t0" }, fraction])).toThrow(/cannot record effects\[1\] \(setPaused\) of queue "q": 1.5 is not an integer/);
    const negative: Effect = { kind: "activate", entry: { ...entry, priority: -1 } };
    expect(() => encodeTurn("q", [negative])).toThrow(ChangeRecordError);
  });

  it("an empty turn is a record too (nothing to apply)", () => {
    expect(decodeTurn(encodeTurn("q", []))).toEqual({ queue: "q", effects: [] });
  });

  it("the decoded effects own no protobuf object: plain values only", () => {
    const { effects } = decodeTurn(encodeTurn("q", [{ kind: "insert", task, entry, createdAtMs: 1_000 }]));
    const insert = effects[0] as Extract<Effect, { kind: "insert" }>;
    expect(Object.getPrototypeOf(insert.task.metadata)).toBe(Object.prototype);
    expect(Object.keys(insert.entry)).toEqual(Object.keys(entry));
    expect("$typeName" in insert.entry).toBe(false);
  });
});
