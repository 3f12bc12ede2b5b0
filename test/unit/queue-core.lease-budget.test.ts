/** A Lease answer stops growing at a byte budget (the node keeps one answer's work bounded). */
import { describe, expect, it } from "vitest";
import { enqueueAll, leasedIds, makeCore, newTask, reload } from "../support/core-fixtures.js";

const sized = (bytes: number) => newTask({ payload: new Uint8Array(bytes) });

describe("QueueCore.lease: byte budget", () => {
  it("takes deliveries in order until their payloads reach the budget, passing it by at most one", () => {
    const { core, time } = makeCore();
    const ids = enqueueAll(core, [sized(400), sized(400), sized(400), sized(400)], time.nowMs);
    expect(leasedIds(core.lease(10, time.nowMs, undefined, 1000))).toEqual(ids.slice(0, 3)); // 400, 800, 1200 ≥ 1000
    expect(leasedIds(core.lease(10, time.nowMs, undefined, 1000))).toEqual(ids.slice(3));
  });

  it("always takes the first delivery, however large", () => {
    const { core, time } = makeCore();
    const ids = enqueueAll(core, [sized(5000), sized(1)], time.nowMs);
    expect(leasedIds(core.lease(10, time.nowMs, undefined, 1000))).toEqual([ids[0]]);
  });

  it("without a budget, max alone bounds the answer", () => {
    const { core, time } = makeCore();
    const ids = enqueueAll(core, Array.from({ length: 5 }, () => sized(1_000_000)), time.nowMs);
    expect(leasedIds(core.lease(4, time.nowMs))).toEqual(ids.slice(0, 4));
  });

  it("payload sizes survive a reload (the budget holds for a rebuilt grain)", () => {
    const { core, time } = makeCore();
    const ids = enqueueAll(core, [sized(600), sized(600), sized(600)], time.nowMs);
    const rebuilt = reload(core, time.nowMs);
    expect(leasedIds(rebuilt.lease(10, time.nowMs, undefined, 1000))).toEqual(ids.slice(0, 2));
  });
});
