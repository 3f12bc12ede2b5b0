/** The packed columns (packed-tasks.ts), the intern table and the index over both (task-index.ts). */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InternTable } from "../../src/grains/queue/intern-table.js";
import { PackedTasks, packable } from "../../src/grains/queue/packed-tasks.js";
import { TaskIndex } from "../../src/grains/queue/task-index.js";
import { indexEntry, type TaskIndexEntry } from "../../src/grains/queue/task.js";
import { enqueueAll, makeCore, newTask } from "../support/core-fixtures.js";

const instant = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 2 ** 52 }), fc.double({ noNaN: true }));
const plainArb: fc.Arbitrary<TaskIndexEntry> = fc.record({
  id: fc.string({ minLength: 1 }), type: fc.string(), key: fc.constantFrom("", "A", "key-00042"), uniqueKey: fc.constantFrom("", "u"),
  priority: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), seq: instant, readyAtMs: instant, timeoutMs: instant,
  deadlineAtMs: instant, expiresAtMs: instant, uniqueUntilMs: instant, retried: fc.nat({ max: 2 ** 31 - 1 }),
  maxRetry: fc.nat({ max: 2 ** 31 - 1 }), backoffBaseMs: instant, backoffMaxMs: instant, attemptNumber: fc.nat({ max: 2 ** 31 - 1 }),
  payloadBytes: fc.nat({ max: 2 ** 31 - 1 }),
}).map((r) => indexEntry({
  id: r.id, type: r.type, priority: r.priority, concurrencyKey: r.key, timeoutMs: r.timeoutMs, deadlineAtMs: r.deadlineAtMs,
  uniqueKey: r.uniqueKey, maxRetry: r.maxRetry, backoffBaseMs: r.backoffBaseMs, backoffMaxMs: r.backoffMaxMs, group: "", rules: [],
}, {
  state: "pending", seq: r.seq, readyAtMs: r.readyAtMs, expiresAtMs: r.expiresAtMs, uniqueUntilMs: r.uniqueUntilMs,
  payloadBytes: r.payloadBytes, retried: r.retried, attemptNumber: r.attemptNumber,
}));

const plain = (id: string, seq = 1): TaskIndexEntry => indexEntry(
  { id, type: "t", priority: 4, concurrencyKey: "", timeoutMs: 0, deadlineAtMs: 0, uniqueKey: "", maxRetry: 3, backoffBaseMs: 1, backoffMaxMs: 2, group: "", rules: [] },
  { state: "pending", seq, readyAtMs: 5, expiresAtMs: 0, uniqueUntilMs: 0, payloadBytes: 3 },
);

describe("PackedTasks", () => {
  it("gives back every field of a packable entry exactly (doubles, -0 and huge instants included)", () => {
    fc.assert(fc.property(fc.array(plainArb, { maxLength: 40 }), (entries) => {
      const packed = new PackedTasks();
      const slots = entries.map((e) => {
        expect(packable(e)).toBe(true);
        return packed.add(e, false);
      });
      entries.forEach((e, i) => expect(packed.entryAt(slots[i]!)).toEqual(e));
    }), { seed: 5 });
  });

  it("refuses what its columns cannot hold: other states, groups, batches, rules, leases, attempts, non-int32 counters", () => {
    const base = plain("x");
    expect(packable(base)).toBe(true);
    const refused: Partial<TaskIndexEntry>[] = [
      { state: "scheduled" }, { state: "active" }, { group: "g" }, { batchId: "b" },
      { rules: [{ ruleId: "t#0", key: "k", maxRuns: 1, strategy: "CANCEL_NEWEST" }] }, { leaseId: "L" }, { leaseExpiresAtMs: 1 },
      { attemptEndsAtMs: 1 }, { attemptStartedAtMs: 1 }, { attemptWorker: "w" }, { priority: 1.5 }, { retried: 2 ** 31 },
      { maxRetry: -0 }, { attemptNumber: Number.NaN }, { payloadBytes: 2 ** 40 },
    ];
    for (const change of refused) expect(packable({ ...base, ...change }), JSON.stringify(change)).toBe(false);
  });

  it("frees a slot only when the task left it and no heap holds it, reuses it, and shrinks once drained", () => {
    const packed = new PackedTasks();
    const a = packed.add(plain("a"), true);
    const b = packed.add(plain("b"), false);
    packed.unpack(a); // still ordered: a heap holds it
    expect(packed.slotsInUse).toBe(2);
    expect(packed.idAt(a)).toBe("a");
    packed.leaveOrder(a);
    expect(packed.slotsInUse).toBe(1);
    expect(packed.add(plain("c"), false)).toBe(a);
    const many = Array.from({ length: 100_000 }, (_, i) => packed.add(plain(`m${i}`), false));
    for (const s of [b, a, ...many]) packed.unpack(s);
    expect(packed.slotsInUse).toBe(0);
    expect(packed.add(plain("d"), false)).toBe(0); // back to a small, empty table
  });
});

describe("InternTable", () => {
  it("keeps each string once while it is referenced, and forgets it with its last reference", () => {
    const t = new InternTable();
    const a = t.take("type:a");
    expect(t.take("type:a")).toBe(a);
    const b = t.take("type:b");
    expect([t.at(a), t.at(b), t.size]).toEqual(["type:a", "type:b", 2]);
    t.release(a);
    expect(t.size).toBe(2);
    t.release(a);
    expect(t.size).toBe(1);
    expect(t.take("type:c")).toBe(a); // the code is reused
  });
});

describe("TaskIndex", () => {
  it("unpacks on get in place (arrival order kept); the read-only lookups never unpack", () => {
    const index = new TaskIndex(new PackedTasks());
    const entries = ["a", "b", "c"].map((id, i) => plain(id, i + 1));
    for (const e of entries) {
      index.set(e);
      index.pack(e, false);
    }
    expect(index.packedIds()).toEqual(["a", "b", "c"]);
    expect([index.stateOf("b"), index.typeOf("b"), index.payloadBytesOf("b"), index.isPendingAt("b", 2), index.isPendingAt("b", 3)])
      .toEqual(["pending", "t", 3, true, false]);
    expect(index.view("b")).toEqual(entries[1]);
    expect(index.packedIds()).toEqual(["a", "b", "c"]);
    const b = index.get("b")!;
    expect(b).toEqual(entries[1]);
    expect(index.get("b")).toBe(b); // now an object: the same one each time
    b.state = "active";
    expect(index.packedIds()).toEqual(["a", "c"]);
    expect(index.idsInState("pending")).toEqual(["a", "c"]);
    expect(index.snapshot().map((e) => e.id)).toEqual(["a", "b", "c"]);
    index.delete("a");
    expect([index.size, index.has("a"), index.idsInState("pending")]).toEqual([2, false, ["c"]]);
  });

  it("does not pack an entry that is not the live one for its id", () => {
    const index = new TaskIndex(new PackedTasks());
    const e = plain("a");
    index.set(e);
    expect(index.pack({ ...e }, false)).toBeUndefined();
    expect(index.pack(e, false)).toBe(0);
  });
});

describe("QueueCore with a backlog", () => {
  it("packs plain pending tasks as they arrive and unpacks each as it is dispatched", () => {
    const { core, time } = makeCore();
    const plainTasks = Array.from({ length: 1_000 }, (_, i) => newTask({ priority: 1 + (i % 9) }));
    const keyed = newTask({ rules: [{ ruleId: "email:send#0", key: "k", maxRuns: 5, strategy: "CANCEL_NEWEST" }] });
    const later = newTask({ processAtMs: time.nowMs + 1_000 });
    enqueueAll(core, [...plainTasks, keyed, later], time.nowMs);
    core.drain();
    expect(core.packedTaskIds()).toEqual(plainTasks.map((t) => t.id));
    const leased = core.lease(1_000, time.nowMs).flatMap((p) => p.taskIds);
    expect(leased).toHaveLength(1_000);
    // Highest priority first, FIFO within one: packed and unpacked tasks are one order.
    const order = [...plainTasks, keyed].sort((a, b) => b.priority - a.priority || 0).map((t) => t.id);
    expect(leased).toEqual(order.slice(0, 1_000));
    expect(core.packedTaskIds()).toHaveLength(1);
  });
});
