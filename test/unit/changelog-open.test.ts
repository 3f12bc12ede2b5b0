/**
 * A node opening its changelog at start (server/changelog-link.ts, `openWithin`): the
 * connection and the creation of the log's stream and the snapshots' bucket are retried
 * together until they work, for a bounded time, on a fake clock. Only the connection used
 * to be retried: a bucket creation that timed out on a fresh, loaded JetStream cluster
 * (three nodes starting at once) made the node exit with "timeout" (cold-failover and
 * zombie tests, in full test/cluster runs).
 */
import { describe, expect, it } from "vitest";
import { ChangeLogConfigError } from "../../src/changelog/jetstream-change-log.js";
import { openWithin } from "../../src/server/changelog-link.js";
import { FakeClock } from "../support/fake-clock.js";

/** Runs `p` to its end, moving the fake clock 100 ms at a time (bounded). */
async function settle<T>(clock: FakeClock, p: Promise<T>, boundMs = 60_000): Promise<T> {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  for (let t = 0; !done; t += 100) {
    if (t > boundMs) throw new Error(`did not settle within ${boundMs}ms of simulated time`);
    clock.advance(100);
    await new Promise((r) => setImmediate(r));
  }
  return p;
}

const quiet = () => {
  const warnings: unknown[] = [];
  return { warnings, logger: { warn: (obj: unknown) => void warnings.push(obj) } };
};

describe("opening the changelog at start", () => {
  it("retries a step that timed out (a stream or bucket not created yet) and resolves once every step worked", async () => {
    const clock = new FakeClock();
    const { warnings, logger } = quiet();
    let attempts = 0;
    const opened = await settle(clock, openWithin("cluster_nats x", clock, logger as never, async () => {
      attempts++;
      if (attempts < 3) throw new Error("timeout");
      return "log and snapshot store";
    }));
    expect(opened).toBe("log and snapshot store");
    expect(attempts).toBe(3);
    expect(warnings).toHaveLength(2);
  });

  it("refuses a server set up wrong at once, and gives up after its time naming the last error", async () => {
    const clock = new FakeClock();
    const { logger } = quiet();
    let attempts = 0;
    const misconfigured = openWithin("cluster_nats x", clock, logger as never, async () => {
      attempts++;
      throw new ChangeLogConfigError("max_payload too small");
    });
    await expect(settle(clock, misconfigured)).rejects.toThrow("max_payload too small");
    expect(attempts).toBe(1);
    const started = clock.nowMs();
    const never = openWithin("cluster_nats x", clock, logger as never, async () => {
      throw new Error("timeout");
    }, 30_000);
    await expect(settle(clock, never)).rejects.toThrow(/cannot open the changelog on cluster_nats x within 30s: timeout/);
    expect(clock.nowMs() - started).toBeGreaterThanOrEqual(30_000);
  });
});
