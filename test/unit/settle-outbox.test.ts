/**
 * The worker's settle outbox: outcomes of one turn go in one call, calls stay within the
 * node's item bound, an unreachable node is retried (so are the items it refused
 * UNAVAILABLE), and `settled` waits for exactly the calls in flight.
 */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { SETTLEMENTS_MAX } from "../../src/base/limits.js";
import { DeliverySchema, Outcome, SettleResponseSchema, type Settlement } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { SettleOutbox, chunkSettlements, settlement } from "../../src/sdk/settle-outbox.js";

const delivery = create(DeliverySchema, { queue: "q", leaseId: "L1" });
const outcomes = (n: number) => Array.from({ length: n }, (_, i) => settlement(delivery, `t${i}`, Outcome.SUCCESS, new Uint8Array(), ""));
const ok = () => Promise.resolve(create(SettleResponseSchema, {}));

describe("SettleOutbox", () => {
  it("sends the outcomes added in one turn in one call", async () => {
    const calls: Settlement[][] = [];
    const outbox = new SettleOutbox({ send: (batch) => (calls.push(batch), ok()), report: () => {} });
    outbox.add(outcomes(2));
    outbox.add(outcomes(3));
    await new Promise((resolve) => setImmediate(resolve));
    await outbox.settled();
    expect(calls.map((c) => c.length)).toEqual([5]);
  });

  it("splits at the node's item bound", () => {
    expect(chunkSettlements(outcomes(SETTLEMENTS_MAX * 2 + 1)).map((c) => c.length)).toEqual([SETTLEMENTS_MAX, SETTLEMENTS_MAX, 1]);
  });

  it("retries while the node is unreachable, and settled() waits for the retried call", async () => {
    let attempts = 0;
    const reported: string[] = [];
    const outbox = new SettleOutbox({
      send: () => (++attempts < 3 ? Promise.reject(new ConveyorError("UNAVAILABLE", "UNREACHABLE", "down")) : ok()),
      report: (error) => reported.push((error as ConveyorError).reason),
    });
    outbox.hold(outcomes(1));
    const flushed = outbox.flush();
    expect(outbox.callsInFlight).toBe(1);
    await outbox.settled();
    await flushed;
    expect([attempts, outbox.callsInFlight, reported]).toEqual([3, 0, ["UNREACHABLE", "UNREACHABLE"]]);
  });

  it("sends again exactly the items the node refused UNAVAILABLE, and not those refused for good", async () => {
    const calls: string[][] = [];
    const refusals = [
      new Map([["t1", { code: 14, reason: "LOG_UNAVAILABLE" }], ["t2", { code: 9, reason: "LEASE_NOT_HELD" }]]),
      new Map([["t1", { code: 14, reason: "LOG_UNAVAILABLE" }]]),
      new Map(),
    ];
    const reported: string[] = [];
    const outbox = new SettleOutbox({
      send: (batch) => {
        calls.push(batch.map((s) => s.taskId));
        const refused = refusals[calls.length - 1]!;
        return Promise.resolve(create(SettleResponseSchema, {
          results: batch.map((s) => ({ taskId: s.taskId, ...(refused.has(s.taskId) ? { error: { ...refused.get(s.taskId)!, message: "no" } } : {}) })),
        }));
      },
      report: (error) => reported.push((error as ConveyorError).reason),
    });
    outbox.hold(outcomes(3));
    await outbox.flush();
    expect(calls).toEqual([["t0", "t1", "t2"], ["t1"], ["t1"]]);
    expect(reported).toEqual(["LOG_UNAVAILABLE", "LEASE_NOT_HELD", "LOG_UNAVAILABLE"]);
  });

  it("a draining flush sends one call even with nothing queued; a closed outbox stops retrying", async () => {
    const drained: boolean[] = [];
    let attempts = 0;
    const outbox = new SettleOutbox({
      send: (_batch, draining) => (drained.push(draining), attempts++, Promise.reject(new ConveyorError("UNAVAILABLE", "UNREACHABLE", "down"))),
      report: () => {},
    });
    outbox.close();
    await outbox.flush(true);
    expect([drained, attempts]).toEqual([[true], 1]);
  });
});
