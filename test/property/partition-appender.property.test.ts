/**
 * Group commit at the log under any schedule of turns, holds, outages (appends lost or
 * stored unacknowledged) and fences by another writer, over the in-memory ChangeLog:
 * - every acknowledged turn is in the log, in the entry whose sequence it was given,
 *   with its records together and in order;
 * - turns are acknowledged in the order they were issued (never a later one first);
 * - nothing this appender wrote follows a fence, and a turn refused as fenced is absent;
 * - no record is stored twice.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MemoryChangeLog } from "../../src/changelog/memory-change-log.js";
import { AppendFailed, PartitionAppender } from "../../src/changelog/partition-appender.js";

type Step =
  | { kind: "turns"; count: number; records: number }
  | { kind: "hold" }
  | { kind: "release" }
  | { kind: "outage"; landing: boolean }
  | { kind: "heal" }
  | { kind: "fence" };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("turns" as const), count: fc.integer({ min: 1, max: 5 }), records: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 2, arbitrary: fc.constant({ kind: "hold" as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: "release" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("outage" as const), landing: fc.boolean() }) },
  { weight: 2, arbitrary: fc.constant({ kind: "heal" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "fence" as const }) },
);

interface Turn {
  index: number;
  records: string[];
  result?: { seq: number } | { error: unknown };
}

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
/** Lets every promise the in-memory log and the appender have chained run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("PartitionAppender (property)", () => {
  it("never acknowledges a turn it did not store, in order, and never writes past a fence", async () => {
    await fc.assert(fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 6 }), async (steps, maxRecords) => {
      const log = new MemoryChangeLog();
      const appender = new PartitionAppender(log, 0, 0, { maxRecords });
      const turns: Turn[] = [];
      let release: (() => void) | undefined;
      let outage = false;
      let fences = 0;
      for (const s of steps) {
        if (s.kind === "turns") {
          for (let i = 0; i < s.count; i++) {
            const turn: Turn = { index: turns.length, records: Array.from({ length: s.records }, (_, r) => `t${turns.length}.${r}`) };
            turns.push(turn);
            appender.append(turn.records.map(enc)).then((seq) => (turn.result = { seq }), (error: unknown) => (turn.result = { error }));
          }
        } else if (s.kind === "hold" && !release) {
          release = log.holdAppends();
        } else if (s.kind === "release" && release) {
          release();
          release = undefined;
        } else if (s.kind === "outage") {
          log.startOutage({ landing: s.landing });
          outage = true;
        } else if (s.kind === "heal" && outage) {
          log.endOutage();
          outage = false;
        } else if (s.kind === "fence" && !outage && !release) {
          expect((await log.appendFence(0, enc(`fence ${fences++}`), await log.lastSeq(0))).kind).toBe("ok");
        }
        await settle();
        // The owner's reaction to an unknown outcome: once the log answers, re-read the tail and go on.
        if (appender.state === "unknown" && !outage && !release) appender.resume(await log.lastSeq(0));
      }
      release?.();
      log.endOutage();
      for (let i = 0; i < 5; i++) await settle();

      const entries = await log.read(0, 1, 10_000);
      const bySeq = new Map(entries.map((e) => [e.seq, e.records.map(dec)]));
      const stored = entries.flatMap((e) => e.records.map(dec));
      expect(new Set(stored).size, "no record stored twice").toBe(stored.length);

      let lastAcked = 0;
      for (const turn of turns) {
        const r = turn.result;
        if (!r) continue; // still waiting behind a failure that was never resumed: refused or pending, never acknowledged
        if ("seq" in r) {
          const entry = bySeq.get(r.seq);
          expect(entry, `turn ${turn.index}'s entry ${r.seq}`).toBeDefined();
          const at = entry!.indexOf(turn.records[0]!);
          expect(entry!.slice(at, at + turn.records.length), `turn ${turn.index}'s records together`).toEqual(turn.records);
          expect(r.seq, `turn ${turn.index} acknowledged in order`).toBeGreaterThanOrEqual(lastAcked);
          lastAcked = r.seq;
        } else if (r.error instanceof AppendFailed && r.error.outcome.kind === "fenced") {
          expect(stored.includes(turn.records[0]!), `fenced turn ${turn.index} absent`).toBe(false);
        }
      }
      const firstFence = entries.findIndex((e) => e.kind === "fence");
      if (firstFence >= 0) expect(entries.slice(firstFence).filter((e) => e.kind === "records"), "records after a fence").toEqual([]);
    }), { seed: 14, numRuns: 150 });
  });
});
