/**
 * TurnJournal on the in-memory changelog: turns reach the log only after their SQLite
 * commit and in order, undone or rolled-back turns never do, a partition is written only
 * after this node fenced it, and a failed append is recovered by reading the tail back
 * (landed records are not appended twice; missing ones are) or ends in a clean refusal
 * when another node fenced the partition.
 */
import { describe, expect, it } from "vitest";
import type { ConveyorError } from "../../src/base/errors.js";
import { MemoryChangeLog } from "../../src/changelog/memory-change-log.js";
import { TurnJournal } from "../../src/changelog/turn-journal.js";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);
const P = 3;

function setUp() {
  const log = new MemoryChangeLog();
  const events: string[] = [];
  const journal = new TurnJournal({
    log, nodeId: "n1", partitionOf: (q) => Number(q.split(":")[0]), now: () => 0,
    events: {
      failed: (p, reason) => events.push(`failed ${p} ${reason}`),
      recovered: (p, n) => events.push(`recovered ${p} ${n}`),
      closed: (p, why) => events.push(`closed ${p} ${why}`),
    },
  });
  /** The partition's log as text: "F" for a fence, else its records joined by "+". */
  const contents = async (p = P) => (await log.read(p, 1, 1_000)).map((e) => (e.kind === "fence" ? "F" : e.records.map(text).join("+")));
  return { log, journal, events, contents };
}

describe("TurnJournal", () => {
  it("fences the partition at open, sends turns only after their commit, in order, and resolves once they are on the log", async () => {
    const { journal, contents } = setUp();
    await journal.openPartition(P, 7, bytes("fence n1@7"));
    expect(journal.isOpen(P)).toBe(true);
    // Open at the claim of epoch 7, not at a later claim's (that one fences again).
    expect(journal.isOpen(P, 7)).toBe(true);
    expect(journal.isOpen(P, 8)).toBe(false);
    journal.record(`${P}:q`, bytes("t1"), 1);
    journal.record(`${P}:q`, bytes("t2"), 2);
    // Not committed yet: nothing on the log.
    expect(await contents()).toEqual(["F"]);
    journal.committed();
    await journal.flushed(P);
    // The appender may group waiting turns into one entry; the order holds either way.
    expect((await contents()).slice(1).join("+")).toBe("t1+t2");
  });

  it("drops an undone write's turns and a rolled-back transaction's", async () => {
    const { journal, contents } = setUp();
    await journal.openPartition(P, 1, bytes("f"));
    journal.record(`${P}:q`, bytes("kept"), 1);
    journal.record(`${P}:q`, bytes("undone"), 2);
    journal.undone(2);
    journal.committed();
    journal.record(`${P}:q`, bytes("rolled back"), 3);
    journal.rolledBack();
    journal.committed();
    await journal.flushed(P);
    expect(await contents()).toEqual(["F", "kept"]);
  });

  it("refuses the callers of a partition it has not fenced", async () => {
    const { journal, contents } = setUp();
    journal.record(`${P}:q`, bytes("t"), 1);
    journal.committed();
    await expect(journal.flushed(P)).rejects.toMatchObject({ code: "UNAVAILABLE", reason: "FENCED" });
    expect(await contents()).toEqual([]);
  });

  it("a claim that cannot read the log's tail (no leader) fails UNAVAILABLE / LOG_UNAVAILABLE, and opens once the log answers", async () => {
    const { log, journal, contents } = setUp();
    log.startOutage();
    // The network fault test saw the JetStream client's TimeoutError here reach callers as INTERNAL.
    await expect(journal.openPartition(P, 1, bytes("f"))).rejects.toMatchObject({ code: "UNAVAILABLE", reason: "LOG_UNAVAILABLE" });
    expect(journal.isOpen(P)).toBe(false);
    log.endOutage();
    await journal.openPartition(P, 1, bytes("f"));
    expect(await contents()).toEqual(["F"]);
  });

  it("after an append whose outcome is unknown but landed, recovers without writing it twice", async () => {
    const { log, journal, events, contents } = setUp();
    await journal.openPartition(P, 1, bytes("f"));
    log.startOutage({ landing: true });
    journal.record(`${P}:q`, bytes("a"), 1);
    journal.committed();
    const err = (await journal.flushed(P).catch((e: unknown) => e)) as ConveyorError;
    expect(err.reason).toBe("LOG_UNAVAILABLE");
    log.endOutage();
    // A later turn waits for recovery, then goes after it.
    journal.record(`${P}:q`, bytes("b"), 2);
    journal.committed();
    await journal.flushed(P);
    expect(await contents()).toEqual(["F", "a", "b"]);
    expect(events).toEqual(["failed 3 no_quorum", "recovered 3 1"]);
  });

  it("after an append that was lost, appends it again before later turns", async () => {
    const { log, journal, events, contents } = setUp();
    await journal.openPartition(P, 1, bytes("f"));
    log.startOutage();
    journal.record(`${P}:q`, bytes("lost"), 1);
    journal.committed();
    await expect(journal.flushed(P)).rejects.toMatchObject({ reason: "LOG_UNAVAILABLE" });
    log.endOutage();
    journal.record(`${P}:q`, bytes("next"), 2);
    journal.committed();
    await journal.flushed(P);
    expect((await contents()).join(",")).toBe("F,lost+next");
    expect(events).toEqual(["failed 3 no_quorum", "recovered 3 2"]);
  });

  it("a recovery whose own append is unknown too appends nothing twice", async () => {
    const { log, journal, contents } = setUp();
    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    await journal.openPartition(P, 1, bytes("f"));
    // "a" lands but its acknowledgement is lost; "b" comes while recovery waits to read.
    log.startOutage({ landing: true });
    journal.record(`${P}:q`, bytes("a"), 1);
    journal.committed();
    await expect(journal.flushed(P)).rejects.toMatchObject({ reason: "LOG_UNAVAILABLE" });
    journal.record(`${P}:q`, bytes("b"), 2);
    journal.committed();
    // Recovery reads "a" back and appends "b", whose acknowledgement is lost as well.
    log.endOutage();
    const release = log.holdAppends();
    await wait(300);
    log.startOutage({ landing: true });
    release();
    await wait(10);
    // It reads again from after "a": "b" is there, and "a" must not go again.
    log.endOutage();
    await wait(300);
    journal.record(`${P}:q`, bytes("c"), 3);
    journal.committed();
    await journal.flushed(P);
    expect(await contents()).toEqual(["F", "a", "b", "c"]);
  });

  it("closes the partition when another node fenced it, and refuses its callers from then on", async () => {
    const { log, journal, events, contents } = setUp();
    await journal.openPartition(P, 1, bytes("f1"));
    // Another node claims the partition and fences the log.
    const other = new TurnJournal({ log, nodeId: "n2", partitionOf: () => P, now: () => 0 });
    await other.openPartition(P, 2, bytes("f2"));
    journal.record(`${P}:q`, bytes("zombie"), 1);
    journal.committed();
    await expect(journal.flushed(P)).rejects.toMatchObject({ code: "UNAVAILABLE", reason: "FENCED" });
    expect(journal.isOpen(P)).toBe(false);
    expect(await contents()).toEqual(["F", "F"]);
    expect(events).toEqual(["failed 3 fenced", "closed 3 another node fenced its changelog"]);
    // The new owner's turns go on.
    other.record(`${P}:q`, bytes("new owner"), 1);
    other.committed();
    await other.flushed(P);
    expect(await contents()).toEqual(["F", "F", "new owner"]);
  });

  it("closes the partition when recovery finds a gap after its last entry: a later owner purged its own fence away", async () => {
    const { log, journal, events, contents } = setUp();
    await journal.openPartition(P, 1, bytes("f1"));
    log.startOutage();
    journal.record(`${P}:q`, bytes("zombie"), 1);
    journal.committed();
    await expect(journal.flushed(P)).rejects.toMatchObject({ reason: "LOG_UNAVAILABLE" });
    // While this node's recovery waits to read again, another node fences, writes, and purges
    // below a snapshot of its own: the fence is gone, its entries remain.
    log.endOutage();
    const other = new TurnJournal({ log, nodeId: "n2", partitionOf: () => P, now: () => 0 });
    await other.openPartition(P, 2, bytes("f2"));
    for (const t of ["n2 a", "n2 b"]) {
      other.record(`${P}:q`, bytes(t), 1);
      other.committed();
      await other.flushed(P);
    }
    await log.purgeBelow(P, await log.lastSeq(P));
    expect(await contents()).toEqual(["n2 b"]);
    journal.record(`${P}:q`, bytes("later"), 2);
    journal.committed();
    await expect(journal.flushed(P)).rejects.toMatchObject({ code: "UNAVAILABLE", reason: "FENCED" });
    expect(journal.isOpen(P)).toBe(false);
    expect(await contents(), "nothing of the fenced node after the new owner's entries").toEqual(["n2 b"]);
    expect(events).toEqual(["failed 3 no_quorum", "closed 3 another node fenced its changelog"]);
  });

  it("a recovery left from an earlier claim of this node does not close its later claim", async () => {
    const { log, journal, contents } = setUp();
    await journal.openPartition(P, 1, bytes("f1"));
    log.startOutage();
    journal.record(`${P}:q`, bytes("old"), 1);
    journal.committed();
    await expect(journal.flushed(P)).rejects.toMatchObject({ reason: "LOG_UNAVAILABLE" });
    // This node claims the partition again (a new registration after a pause): its new
    // fence goes first, then the old claim's recovery appends again, and is refused.
    log.endOutage();
    const release = log.holdAppends();
    const before = log.appendCalls;
    const reopened = journal.openPartition(P, 2, bytes("f2"));
    // Held: the new fence, and the old recovery's append again once its retry comes round.
    while (log.appendCalls < before + 2) await new Promise((resolve) => setImmediate(resolve));
    release();
    await reopened;
    // The old recovery's refused append is answered within the same macrotask.
    await new Promise((resolve) => setImmediate(resolve));
    expect(journal.isOpen(P, 2), "the old recovery gave up without closing the new claim").toBe(true);
    journal.record(`${P}:q`, bytes("new"), 2);
    journal.committed();
    await journal.flushed(P);
    expect(await contents()).toEqual(["F", "F", "new"]);
  });

  it("a recovery left over from an earlier claim never closes a later claim of the partition (cut off, taken over, given back)", async () => {
    /** A memory log whose reads can be held, as a read in flight while a partition heals. */
    class HeldReads extends MemoryChangeLog {
      holdingReads = false;
      private readonly waiting: Array<() => void> = [];
      override async read(partition: number, fromSeq: number, maxEntries: number) {
        if (this.holdingReads) await new Promise<void>((resolve) => this.waiting.push(resolve));
        return super.read(partition, fromSeq, maxEntries);
      }
      release(): void {
        this.holdingReads = false;
        for (const resume of this.waiting.splice(0)) resume();
      }
    }
    const log = new HeldReads();
    const events: string[] = [];
    const journal = new TurnJournal({ log, nodeId: "n1", partitionOf: () => P, now: () => 0, events: { closed: (p, why) => events.push(`closed ${p} ${why}`) } });
    await journal.openPartition(P, 1, bytes("f1"));
    // n1 is cut off: its append fails, and its recovery's read hangs.
    log.startOutage();
    log.holdingReads = true;
    journal.record(`${P}:q`, bytes("lost"), 1);
    journal.committed();
    await expect(journal.flushed(P)).rejects.toMatchObject({ reason: "LOG_UNAVAILABLE" });
    // Meanwhile n2 takes P over; after the heal P is handed back to n1, which claims it at a new epoch.
    log.endOutage();
    await new TurnJournal({ log, nodeId: "n2", partitionOf: () => P, now: () => 0 }).openPartition(P, 2, bytes("f2"));
    await journal.openPartition(P, 3, bytes("f3"));
    // The old recovery's read now answers, with both fences: it must leave the new claim alone.
    log.release();
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual([]);
    expect(journal.isOpen(P)).toBe(true);
    journal.record(`${P}:q`, bytes("after"), 2);
    journal.committed();
    await journal.flushed(P);
    expect((await log.read(P, 1, 10)).map((e) => (e.kind === "fence" ? "F" : e.records.map(text).join("+")))).toEqual(["F", "F", "F", "after"]);
  });

  it("keeps each partition's failures to itself", async () => {
    const { log, journal } = setUp();
    await journal.openPartition(1, 1, bytes("f"));
    await journal.openPartition(2, 1, bytes("f"));
    const other = new TurnJournal({ log, nodeId: "n2", partitionOf: () => 1, now: () => 0 });
    await other.openPartition(1, 2, bytes("f2"));
    journal.record("1:q", bytes("x"), 1);
    journal.record("2:q", bytes("y"), 1);
    journal.committed();
    await expect(journal.flushed(1)).rejects.toMatchObject({ reason: "FENCED" });
    await expect(journal.flushed(2)).resolves.toBeUndefined();
  });
});
