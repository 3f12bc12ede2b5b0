/** Attempt timing from a turn's written effects: which ends are timed; nothing kept between turns. */
import { describe, expect, it } from "vitest";
import { AttemptTiming, type AttemptEnd } from "../../src/server/attempt-timing.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import type { TaskIndexEntry } from "../../src/grains/queue/task.js";

const entry = (id: string, readyAtMs = 0) => ({ id, readyAtMs }) as TaskIndexEntry;
const failure = { lastError: "x", lastFailedAtMs: 0 };
const attempt = (taskId: string, startedAtMs: number, endedAtMs: number, outcome = "failed") =>
  ({ kind: "recordAttempt", taskId, number: 1, startedAtMs, endedAtMs, workerId: "w", outcome, error: "" }) as Effect;

function harness() {
  const seen = { waits: [] as number[], runs: [] as Array<[AttemptEnd, number]>, retries: 0 };
  const timing = new AttemptTiming({
    started: (_q, waitMs) => seen.waits.push(waitMs),
    ended: (_q, end, runMs) => seen.runs.push([end, runMs]),
    retried: () => { seen.retries += 1; },
  });
  return { seen, timing };
}

describe("AttemptTiming", () => {
  it("times waits from ready to start and runs from the recorded start to completion, retry or archive", () => {
    const { seen, timing } = harness();
    timing.apply("q", [{ kind: "activate", entry: entry("a", 1_000) }, { kind: "activate", entry: entry("b", 1_500) },
      { kind: "activate", entry: entry("c", 2_000) }] as Effect[], 2_000);
    timing.apply("q", [attempt("a", 2_000, 2_250, "succeeded"),
      { kind: "complete", entry: entry("a"), outcome: { finishedAtMs: 2_250, result: new Uint8Array() } }] as Effect[], 2_250);
    timing.apply("q", [attempt("b", 2_000, 2_500), { kind: "retry", entry: entry("b"), outcome: failure }] as Effect[], 2_500);
    timing.apply("q", [attempt("c", 2_000, 3_000, "failed_no_retry"),
      { kind: "archive", entry: entry("c"), outcome: { lastError: "x", finishedAtMs: 3_000 } }] as Effect[], 3_000);
    expect(seen.waits).toEqual([1_000, 500, 0]);
    expect(seen.runs).toEqual([["completed", 250], ["retry", 500], ["archived", 1_000]]);
    expect(seen.retries).toBe(1);
  });

  it("a lapse, release or cancel ends an attempt untimed; a transition without a recorded attempt is not timed", () => {
    const { seen, timing } = harness();
    timing.apply("q", [attempt("a", 0, 10, "lease_expired"), { kind: "requeue", entry: entry("a"), outcome: failure },
      attempt("b", 0, 10, "released"), { kind: "release", entry: entry("b") },
      attempt("c", 0, 10, "cancelled"), { kind: "cancel", entry: entry("c"), outcome: { finishedAtMs: 10, cancelReason: "OPERATOR" } }] as Effect[], 10);
    // An operator's archive of a pending task ends no attempt.
    timing.apply("q", [{ kind: "archive", entry: entry("d"), outcome: { lastError: "", finishedAtMs: 20 } }] as Effect[], 20);
    // A run time is not carried from one turn to the next.
    timing.apply("q", [attempt("e", 0, 30)] as Effect[], 30);
    timing.apply("q", [{ kind: "retry", entry: entry("e"), outcome: failure }] as Effect[], 30);
    expect(seen.runs).toEqual([]);
    expect(seen.retries).toBe(1);
  });
});
