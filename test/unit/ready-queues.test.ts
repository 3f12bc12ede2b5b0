/** ReadyQueues: per-type heaps, so a caller leases only the types it declared (issue 11, item 6). */
import { describe, expect, it } from "vitest";
import { PackedTasks } from "../../src/grains/queue/packed-tasks.js";
import { ReadyQueues, type LeaseCaps } from "../../src/grains/queue/ready-queues.js";
import { indexEntry } from "../../src/grains/queue/task.js";

const types = new Map<string, string>();
const item = (id: string, type: string, seq: number, priority = 0) => {
  types.set(id, type);
  return { id, priority, seq };
};
const caps = (declared?: string[], batchTypes: string[] = []): LeaseCaps =>
  ({ batchTypes: new Set(batchTypes), ...(declared ? { types: new Set(declared) } : {}) });
const drain = (q: ReadyQueues, c: LeaseCaps) => {
  const out: string[] = [];
  for (let p = q.pop(c); p; p = q.pop(c)) out.push(p.item.id);
  return out;
};

describe("ReadyQueues", () => {
  it("gives a caller only the types it declared, in dispatch order; the rest stay", () => {
    const q = new ReadyQueues((id) => types.get(id));
    q.pushTask(item("a1", "a", 1));
    q.pushTask(item("b1", "b", 2));
    q.pushTask(item("a2", "a", 3, 5));
    q.pushTask(item("c1", "c", 4));
    expect(drain(q, caps(["a"]))).toEqual(["a2", "a1"]);
    expect(q.size).toBe(2);
    expect(q.peek(caps(["a"]))).toBeUndefined();
    expect(drain(q, caps(["b", "c", "zzz"]))).toEqual(["b1", "c1"]);
  });

  it("a caller without declared types takes every type, in one global order", () => {
    const q = new ReadyQueues((id) => types.get(id));
    q.pushTask(item("x1", "x", 2));
    q.pushTask(item("y1", "y", 1));
    q.pushTask(item("y2", "y", 3, 9));
    expect(drain(q, caps())).toEqual(["y2", "y1", "x1"]);
  });

  it("batches still go only to callers with a batch handler, ordered against single tasks", () => {
    const q = new ReadyQueues((id) => types.get(id));
    q.pushTask(item("s1", "s", 2));
    q.pushBatch("g", { id: "batch1", priority: 0, seq: 1 });
    expect(drain(q, caps(["s"]))).toEqual(["s1"]);
    expect(q.size).toBe(1);
    expect(drain(q, caps(["s", "g"], ["g"]))).toEqual(["batch1"]);
  });

  it("dropHead removes the head peek returned, from the right type's heap", () => {
    const q = new ReadyQueues((id) => types.get(id));
    q.pushTask(item("d1", "d", 1));
    q.pushTask(item("e1", "e", 2));
    const head = q.peek(caps(["e"]))!;
    expect(head.item.id).toBe("e1");
    q.dropHead(head);
    expect(drain(q, caps())).toEqual(["d1"]);
  });

  it("without a type lookup, a declared-types caller still takes any single task (the pre-types behaviour)", () => {
    const q = new ReadyQueues();
    q.pushTask(item("u1", "u", 1));
    expect(drain(q, caps(["other"]))).toEqual(["u1"]);
  });

  it("packed slots and ready items are one order: heads compared across both, per type, dropHead from the right heap", () => {
    const packed = new PackedTasks();
    const q = new ReadyQueues((id) => types.get(id), packed);
    const pack = (id: string, type: string, seq: number, priority = 0) => {
      types.set(id, type);
      const slot = packed.add(indexEntry(
        { id, type, priority, concurrencyKey: "", timeoutMs: 0, deadlineAtMs: 0, uniqueKey: "", maxRetry: 0, backoffBaseMs: 0, backoffMaxMs: 0, group: "", rules: [] },
        { state: "pending", seq, readyAtMs: 0, expiresAtMs: 0, uniqueUntilMs: 0, payloadBytes: 0 },
      ), true);
      q.pushPacked(type, slot);
    };
    pack("p1", "a", 1);
    q.pushTask(item("i2", "a", 2));
    pack("p3", "a", 3);
    pack("p4", "b", 4, 5);
    q.pushTask(item("i5", "b", 5));
    expect(q.size).toBe(5);
    const head = q.peek(caps(["a"]))!;
    expect(head).toMatchObject({ item: { id: "p1", seq: 1 }, packed: true, taskType: "a" });
    q.dropHead(head);
    expect(drain(q, caps(["a"]))).toEqual(["i2", "p3"]);
    expect(drain(q, caps())).toEqual(["p4", "i5"]);
    expect([q.size, packed.slotsInUse]).toEqual([0, 3]); // still packed: the index lets go of them, not the heap
  });
});
