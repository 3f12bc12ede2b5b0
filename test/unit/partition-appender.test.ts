/**
 * Group commit at the log (PartitionAppender) over the in-memory ChangeLog: one append in
 * flight per partition, the turns that wait go together as the next entry, and a failed
 * append stops the partition (fenced for good; unknown until the tail is re-read).
 */
import { describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { MemoryChangeLog } from "../../src/changelog/memory-change-log.js";
import { ENTRY_BYTES_MAX } from "../../src/changelog/changelog.js";
import { AppendFailed, PartitionAppender } from "../../src/changelog/partition-appender.js";

const rec = (text: string) => new TextEncoder().encode(text);
const texts = (records: Uint8Array[]) => records.map((r) => new TextDecoder().decode(r));
const settled = <T>(p: Promise<T>) => p.then((v) => ({ ok: true as const, v }), (e: unknown) => ({ ok: false as const, e }));

describe("PartitionAppender", () => {
  it("sends the first turn at once and the turns that arrive meanwhile together, in order", async () => {
    const log = new MemoryChangeLog();
    const appender = new PartitionAppender(log, 3, 0);
    const release = log.holdAppends();
    const first = appender.append([rec("t1")]);
    const rest = [appender.append([rec("t2a"), rec("t2b")]), appender.append([rec("t3")]), appender.append([rec("t4")])];
    expect(log.appendCalls).toBe(1);
    release();
    const s1 = await first;
    const seqs = await Promise.all(rest);
    expect(new Set(seqs).size).toBe(1);
    expect(seqs[0]).toBeGreaterThan(s1);
    expect(log.appendCalls).toBe(2);
    expect(appender.lastSeq).toBe(seqs[0]);
    const entries = await log.read(3, 1, 10);
    expect(entries.map((e) => texts(e.records))).toEqual([["t1"], ["t2a", "t2b", "t3", "t4"]]);
  });

  it("groups whole turns only, up to the record and byte limits", async () => {
    const log = new MemoryChangeLog();
    const appender = new PartitionAppender(log, 0, 0, { maxRecords: 3, maxBytes: 4 + 3 * (4 + 2) });
    const release = log.holdAppends();
    const all = [appender.append([rec("a0")]), appender.append([rec("b0"), rec("b1")]), appender.append([rec("c0"), rec("c1")]), appender.append([rec("d0")])];
    release();
    await Promise.all(all);
    const entries = await log.read(0, 1, 10);
    // a0 alone (in flight first), then b + c would be 4 records > 3: b alone, then c + d.
    expect(entries.map((e) => texts(e.records))).toEqual([["a0"], ["b0", "b1"], ["c0", "c1", "d0"]]);
  });

  it("stops for good when fenced: the turn, those waiting behind it and every later one are refused", async () => {
    const log = new MemoryChangeLog();
    const appender = new PartitionAppender(log, 1, 0);
    await appender.append([rec("mine")]);
    // A new owner fences the partition behind this appender's back.
    expect((await log.appendFence(1, rec("fence"), appender.lastSeq)).kind).toBe("ok");
    const release = log.holdAppends();
    const refused = [settled(appender.append([rec("zombie 1")])), settled(appender.append([rec("zombie 2")]))];
    release();
    for (const r of await Promise.all(refused)) {
      expect(r.ok).toBe(false);
      expect(r.ok ? undefined : r.e).toBeInstanceOf(AppendFailed);
      expect(r.ok ? undefined : (r.e as AppendFailed).outcome.kind).toBe("fenced");
    }
    expect(appender.state).toBe("fenced");
    const calls = log.appendCalls;
    await expect(appender.append([rec("later")])).rejects.toBeInstanceOf(AppendFailed);
    expect(log.appendCalls).toBe(calls);
    expect(() => appender.resume(99)).toThrow(/fenced/);
    expect((await log.read(1, 1, 10)).map((e) => e.kind)).toEqual(["records", "fence"]);
  });

  it("stops on an unknown outcome until resumed from the re-read tail", async () => {
    const log = new MemoryChangeLog();
    const appender = new PartitionAppender(log, 2, 0);
    await appender.append([rec("before")]);
    log.startOutage({ landing: true });
    const lost = await settled(appender.append([rec("maybe")]));
    expect(lost.ok ? undefined : (lost.e as AppendFailed).outcome).toMatchObject({ kind: "unknown", reason: "no_quorum" });
    expect(appender.state).toBe("unknown");
    await expect(appender.append([rec("refused while unknown")])).rejects.toBeInstanceOf(AppendFailed);
    log.endOutage();
    // The owner re-reads the tail: the unacknowledged entry did land.
    const tail = await log.lastSeq(2);
    expect(tail).toBeGreaterThan(appender.lastSeq);
    appender.resume(tail);
    const seq = await appender.append([rec("after")]);
    expect(seq).toBeGreaterThan(tail);
    expect((await log.read(2, 1, 10)).map((e) => texts(e.records))).toEqual([["before"], ["maybe"], ["after"]]);
  });

  it("refuses bad input (an empty turn, an entry too big) without stopping the partition", async () => {
    const log = new MemoryChangeLog();
    const appender = new PartitionAppender(log, 4, 0);
    await expect(appender.append([])).rejects.toMatchObject({ reason: "INVALID_FIELD", field: "records" });
    const tooBig = await settled(appender.append([new Uint8Array(ENTRY_BYTES_MAX)]));
    expect(tooBig.ok ? undefined : tooBig.e).toBeInstanceOf(ConveyorError);
    expect(appender.state).toBe("open");
    expect(await appender.append([rec("fine")])).toBeGreaterThan(0);
    expect((await log.read(4, 1, 10)).map((e) => texts(e.records))).toEqual([["fine"]]);
  });
});
