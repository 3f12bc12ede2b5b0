/**
 * Where the SDK worker ends an attempt on its own clock (issue 9, finding 12): from the
 * time the node had left when it leased the delivery, so skew between the two clocks
 * never makes the worker give up before the node (which is authoritative).
 */
import { describe, expect, it } from "vitest";
import { attemptEndMs } from "../../src/sdk/worker.js";

const TTL_MS = 30_000;
/** A delivery the node leased at `leasedAtMs` (its clock) whose attempt ends `leftMs` later. */
const delivery = (leasedAtMs: number, leftMs: number) => ({
  leaseExpiresAtMs: BigInt(leasedAtMs + TTL_MS), deadlineAtMs: leftMs > 0 ? BigInt(leasedAtMs + leftMs) : 0n,
});

describe("attemptEndMs", () => {
  it("counts the time left from when the answer arrived, whatever the skew", () => {
    const receivedAtMs = 1_000_000;
    for (const skewMs of [-60_000, -5, 0, 5, 60_000]) {
      // The node's clock reads receivedAtMs + skewMs - 3 when it leases (3 ms of latency).
      const leasedAtMs = receivedAtMs + skewMs - 3;
      expect(attemptEndMs(delivery(leasedAtMs, 500), TTL_MS, receivedAtMs), `skew ${skewMs}`).toBe(receivedAtMs + 500);
    }
  });

  it("no deadline: no end; an end already passed on the node: at once; no TTL in the answer: the node's instant", () => {
    expect(attemptEndMs(delivery(5_000, 0), TTL_MS, 9_000)).toBe(0);
    expect(attemptEndMs({ leaseExpiresAtMs: 40_000n, deadlineAtMs: 9_000n }, TTL_MS, 20_000)).toBe(20_000);
    expect(attemptEndMs(delivery(5_000, 500), 0, 1_000)).toBe(5_500);
  });
});
