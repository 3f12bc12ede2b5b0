/** Attempt timing from written effects: which ends are timed, and what is forgotten. */
import { describe, expect, it } from "vitest";
import { AttemptStarts, type AttemptEnd } from "../../src/server/attempt-starts.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import type { TaskIndexEntry } from "../../src/grains/queue/task.js";

const entry = (id: string, readyAtMs = 0) => ({ id, readyAtMs }) as TaskIndexEntry;
const failure = { lastError: "x", lastFailedAtMs: 0 };

function harness() {
  const seen = { waits: [] as number[], runs: [] as Array<[AttemptEnd, number]>, retries: 0 };
  const starts = new AttemptStarts({
    started: (_q, waitMs) => seen.waits.push(waitMs),
    ended: (_q, end, runMs) => seen.runs.push([end, runMs]),
    retried: () => { seen.retries += 1; },
  });
  return { seen, starts };
}

describe("AttemptStarts", () => {
  it("times waits from ready to start and runs from start to completion, retry or archive", () => {
    const { seen, starts } = harness();
    starts.apply("q", [{ kind: "activate", entry: entry("a", 1_000) }, { kind: "activate", entry: entry("b", 1_500) },
      { kind: "activate", entry: entry("c", 2_000) }] as Effect[], 2_000);
    starts.apply("q", [{ kind: "complete", entry: entry("a"), outcome: { finishedAtMs: 2_250, result: new Uint8Array() } }] as Effect[], 2_250);
    starts.apply("q", [{ kind: "retry", entry: entry("b"), outcome: failure }] as Effect[], 2_500);
    starts.apply("q", [{ kind: "archive", entry: entry("c"), outcome: { lastError: "x", finishedAtMs: 3_000 } }] as Effect[], 3_000);
    expect(seen.waits).toEqual([1_000, 500, 0]);
    expect(seen.runs).toEqual([["completed", 250], ["retry", 500], ["archived", 1_000]]);
    expect(seen.retries).toBe(1);
  });

  it("a lapse, release or cancel ends an attempt untimed; a task running across a grain reload is not timed", () => {
    const { seen, starts } = harness();
    starts.apply("q", ["a", "b", "c"].map((id) => ({ kind: "activate", entry: entry(id) })) as Effect[], 0);
    starts.apply("q", [{ kind: "requeue", entry: entry("a"), outcome: failure }, { kind: "release", entry: entry("b") },
      { kind: "cancel", entry: entry("c"), outcome: { finishedAtMs: 1, cancelReason: "OPERATOR" } }] as Effect[], 10);
    starts.apply("q", [{ kind: "activate", entry: entry("d") }] as Effect[], 10);
    starts.forgetQueue("q");
    starts.apply("q", [{ kind: "complete", entry: entry("d"), outcome: { finishedAtMs: 20, result: new Uint8Array() } }] as Effect[], 20);
    expect(seen.runs).toEqual([]);
    // A retry of a task whose start was not seen still counts as a retry.
    starts.apply("q", [{ kind: "retry", entry: entry("e"), outcome: failure }] as Effect[], 30);
    expect(seen.retries).toBe(1);
  });
});
