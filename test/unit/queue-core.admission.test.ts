import { describe, expect, it } from "vitest";
import type { KnownIds } from "../../src/grains/queue/queue-core.js";
import {
  QUEUE,
  enqueueAll,
  expectConveyorError,
  inserts,
  leaseOne,
  makeCore,
  newTask,
  settleOk,
} from "../support/core-fixtures.js";

describe("QueueCore: unique keys", () => {
  it("refuses a second task with the same unique key while the first is unfinished", () => {
    const { core, time } = makeCore();
    const first = newTask({ uniqueKey: "invoice-7" });
    enqueueAll(core, [first], time.nowMs);
    core.drain();
    const [second] = core.enqueue([newTask({ uniqueKey: "invoice-7" })], new Map(), time.advance(1), false);
    expect(second!.ok).toBe(false);
    if (second!.ok) return;
    expectConveyorError(second!.error, "ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT");
    expect(second!.error.field).toBe("task.unique_key");
    expect(second!.error.message).toContain(first.id);
    expect(core.drain().effects).toEqual([]);

    // Still held while it runs.
    const plan = leaseOne(core, time.nowMs);
    const [whileActive] = core.enqueue([newTask({ uniqueKey: "invoice-7" })], new Map(), time.nowMs, false);
    expect(whileActive!.ok).toBe(false);

    // Free once the first has finished.
    settleOk(core, plan, time.nowMs);
    const [third] = core.enqueue([newTask({ uniqueKey: "invoice-7" })], new Map(), time.nowMs, false);
    expect(third).toMatchObject({ ok: true, existed: false });
  });

  it("frees the key when the holder is archived, cancelled or deleted", () => {
    const { core, time } = makeCore();
    const a = newTask({ uniqueKey: "k1", maxRetry: 0 });
    const b = newTask({ uniqueKey: "k2" });
    const c = newTask({ uniqueKey: "k3" });
    enqueueAll(core, [a, b, c], time.nowMs);
    settleOk(core, leaseOne(core, time.nowMs), time.nowMs, { outcome: "retry" }); // a archived
    expect(core.cancel(b.id, "OPERATOR", time.nowMs)).toBeNull();
    expect(core.delete(c.id)).toBeNull();
    const outcomes = core.enqueue(["k1", "k2", "k3"].map((uniqueKey) => newTask({ uniqueKey })), new Map(), time.nowMs, false);
    expect(outcomes.map((o) => o.ok)).toEqual([true, true, true]);
  });

  it("with uniqueTtlMs the key is free after the TTL even if the holder is unfinished", () => {
    const { core, time } = makeCore();
    const t0 = time.nowMs;
    const first = newTask({ uniqueKey: "k", uniqueTtlMs: 1_000, processAtMs: t0 + 60_000 });
    enqueueAll(core, [first], t0);
    expect(core.snapshot()[0]!.uniqueUntilMs).toBe(t0 + 1_000);
    const [early] = core.enqueue([newTask({ uniqueKey: "k" })], new Map(), t0 + 999, false);
    expect(early!.ok).toBe(false);
    const [late] = core.enqueue([newTask({ uniqueKey: "k" })], new Map(), t0 + 1_000, false);
    expect(late).toMatchObject({ ok: true, existed: false });
    expect(core.has(first.id)).toBe(true);
    // The new holder keeps the key even though the old one finishes later.
    expect(core.cancel(first.id, "OPERATOR", t0 + 1_001)).toBeNull();
    const [again] = core.enqueue([newTask({ uniqueKey: "k" })], new Map(), t0 + 1_002, false);
    expect(again!.ok).toBe(false);
  });

  it("two items of one batch with the same unique key: the second is refused", () => {
    const { core, time } = makeCore();
    const outcomes = core.enqueue([newTask({ uniqueKey: "k" }), newTask({ uniqueKey: "k" })], new Map(), time.nowMs, false);
    expect(outcomes[0]).toMatchObject({ ok: true });
    expect(outcomes[1]!.ok).toBe(false);
    if (!outcomes[1]!.ok) expectConveyorError(outcomes[1]!.error, "ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT");
    expect(inserts(core.drain().effects)).toHaveLength(1);
  });
});

describe("QueueCore: idempotent task ids", () => {
  it("the same chosen id twice: the second returns existed and inserts nothing", () => {
    const { core, time } = makeCore();
    const t = newTask({ id: "order-1", idChosen: true });
    const [first] = core.enqueue([t], new Map(), time.nowMs, false);
    expect(first).toEqual({ ok: true, id: "order-1", state: "pending", existed: false });
    expect(inserts(core.drain().effects)).toHaveLength(1);

    const [second] = core.enqueue([{ ...t, priority: 9 }], new Map(), time.advance(1), false);
    expect(second).toEqual({ ok: true, id: "order-1", state: "pending", existed: true });
    expect(core.drain().effects).toEqual([]);
    expect(core.snapshot()).toHaveLength(1);
    expect(core.snapshot()[0]!.priority).toBe(4);

    // Reports the live state.
    leaseOne(core, time.nowMs);
    const [third] = core.enqueue([t], new Map(), time.nowMs, false);
    expect(third).toMatchObject({ ok: true, state: "active", existed: true });
  });

  it("the same chosen id twice in one batch: one insert, the second reports existed", () => {
    const { core, time } = makeCore();
    const t = newTask({ id: "dup", idChosen: true });
    const outcomes = core.enqueue([t, { ...t }], new Map(), time.nowMs, false);
    expect(outcomes).toEqual([
      { ok: true, id: "dup", state: "pending", existed: false },
      { ok: true, id: "dup", state: "pending", existed: true },
    ]);
    expect(inserts(core.drain().effects)).toHaveLength(1);
  });

  it("an id the shell knows in this queue (finished) returns existed with its stored state", () => {
    const { core, time } = makeCore();
    const known: KnownIds = new Map([["done-1", { queue: QUEUE, state: "completed" as const }]]);
    const [o] = core.enqueue([newTask({ id: "done-1", idChosen: true })], known, time.nowMs, false);
    expect(o).toEqual({ ok: true, id: "done-1", state: "completed", existed: true });
    expect(core.drain().effects).toEqual([]);
    expect(core.has("done-1")).toBe(false);
  });

  it("an id used in another queue is refused with TASK_ID_CONFLICT", () => {
    const { core, time } = makeCore();
    const known: KnownIds = new Map([["x-1", { queue: "other", state: "pending" as const }]]);
    const [o] = core.enqueue([newTask({ id: "x-1", idChosen: true })], known, time.nowMs, false);
    expect(o!.ok).toBe(false);
    if (o!.ok) return;
    expectConveyorError(o!.error, "ALREADY_EXISTS", "TASK_ID_CONFLICT");
    expect(o!.error.field).toBe("task.task_id");
    expect(core.drain().effects).toEqual([]);
  });

  it("ids not chosen by the caller are not looked up in known", () => {
    const { core, time } = makeCore();
    const known: KnownIds = new Map([["gen-1", { queue: "other", state: "pending" as const }]]);
    const [o] = core.enqueue([newTask({ id: "gen-1", idChosen: false })], known, time.nowMs, false);
    expect(o).toMatchObject({ ok: true, existed: false });
  });

  // Regression: admit() reserves a chosen id in the batch (ids.add) before the
  // unique-key check, so when that first item is refused, a later item of the same
  // batch with the same id is answered "existed: true" although nothing was stored.
  it("a chosen id whose first batch item was refused is not reported as existing", () => {
    const { core, time } = makeCore();
    enqueueAll(core, [newTask({ uniqueKey: "K" })], time.nowMs);
    core.drain();
    const outcomes = core.enqueue(
      [newTask({ id: "X", idChosen: true, uniqueKey: "K" }), newTask({ id: "X", idChosen: true })],
      new Map(), time.nowMs, false,
    );
    expect(outcomes[0]!.ok).toBe(false);
    // Today: { ok: true, existed: true } while core.has("X") is false and no insert was
    // emitted. "existed: true" must mean the task exists; the natural fix admits the
    // second item (inserted, existed: false).
    const second = outcomes[1]!;
    if (second.ok && second.existed) expect(core.has("X"), "claimed to exist").toBe(true);
    expect(second).toEqual({ ok: true, id: "X", state: "pending", existed: false });
  });
});

describe("QueueCore: atomic enqueue", () => {
  it("if one item fails, nothing is inserted; the outcomes still say which item failed", () => {
    const { core, time } = makeCore();
    enqueueAll(core, [newTask({ uniqueKey: "taken" })], time.nowMs);
    core.drain();
    const batch = [newTask(), newTask({ uniqueKey: "taken" }), newTask({ uniqueKey: "fresh" })];
    const outcomes = core.enqueue(batch, new Map(), time.nowMs, true);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, true]);
    const { effects, readyChanged } = core.drain();
    expect(effects).toEqual([]);
    expect(readyChanged).toBe(false);
    expect(core.snapshot()).toHaveLength(1);
    for (const t of batch) expect(core.has(t.id)).toBe(false);
    // Nothing was reserved by the failed batch.
    const [fresh] = core.enqueue([newTask({ uniqueKey: "fresh" })], new Map(), time.nowMs, true);
    expect(fresh).toMatchObject({ ok: true, existed: false });
  });

  it("non-atomic: the good items are inserted, in order", () => {
    const { core, time } = makeCore();
    enqueueAll(core, [newTask({ uniqueKey: "taken" })], time.nowMs);
    core.drain();
    const batch = [newTask(), newTask({ uniqueKey: "taken" }), newTask()];
    const outcomes = core.enqueue(batch, new Map(), time.nowMs, false);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, true]);
    expect(inserts(core.drain().effects).map((e) => e.task.id)).toEqual([batch[0]!.id, batch[2]!.id]);
  });

  it("atomic and all good: every item is inserted", () => {
    const { core, time } = makeCore();
    const batch = [newTask(), newTask({ processAtMs: time.nowMs + 10 }), newTask({ id: "c", idChosen: true })];
    const outcomes = core.enqueue(batch, new Map(), time.nowMs, true);
    expect(outcomes.map((o) => o.ok && o.state)).toEqual(["pending", "scheduled", "pending"]);
    const effects = core.drain().effects;
    expect(inserts(effects).map((e) => e.entry.state)).toEqual(["pending", "scheduled", "pending"]);
    expect(effects.every((e) => e.kind === "insert")).toBe(true);
  });
});
