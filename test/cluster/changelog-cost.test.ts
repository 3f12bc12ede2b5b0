/**
 * What the changelog costs an acknowledged call (issue 14's report), measured in one run:
 * two one-node clusters on the same etcd and machine, one without a changelog (part 1)
 * and one with `cluster_nats` on three nats-server (R3), each call answered only once
 * SQLite and a JetStream quorum have it. Serial enqueues (one in flight: the round trip a
 * caller waits for) and 50 in flight (throughput, where group commit at the log batches),
 * in interleaved rounds so that the machine's noise hits both alike. Printed; the bounds
 * only catch a log path gone badly wrong.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, json, newTask } from "../../src/index.js";
import { clusterFixture, startCluster } from "../support/cluster.js";
import { startNats, type NatsCluster } from "../support/nats.js";

const fixture = clusterFixture();
const { nodes, closers } = fixture;
let nats: NatsCluster | undefined;

beforeAll(async () => {
  nats = await startNats({ size: 3 });
});
afterAll(async () => {
  await nats?.stop();
});

const quantile = (list: number[], q: number) => [...list].sort((a, b) => a - b)[Math.floor(q * (list.length - 1))]!;

async function serial(client: Client, queue: string, n: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await client.enqueue(newTask("job", json({ i })), { queue });
    ms.push(performance.now() - t0);
  }
  return ms;
}

/** Enqueues per second with `inFlight` callers, `n` in all. */
async function concurrent(client: Client, queue: string, n: number, inFlight: number): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < n) {
      next += 1;
      await client.enqueue(newTask("job", json({ next })), { queue });
    }
  }));
  return n / ((performance.now() - t0) / 1000);
}

describe("the changelog's cost per acknowledged call (real processes)", { timeout: 120_000 }, () => {
  it("serial and concurrent enqueues with and without the log, one run (printed)", async () => {
    const plain = (await startCluster(fixture.etcd, ["plain"], nodes, 5, closers)).byId.get("plain")!;
    const logged = (await startCluster(fixture.etcd, ["logged"], nodes, 5, closers, { cluster_nats: nats!.urls.join(",") })).byId.get("logged")!;
    const clients = [plain, logged].map((node) => {
      const c = new Client({ address: node.grpcAddress });
      closers.push(() => c.close());
      return c;
    });
    const [without, withLog] = clients as [Client, Client];
    // Claims, fences and warm channels first.
    await serial(without, "cost", 50);
    await serial(withLog, "cost", 50);
    const a: number[] = [];
    const b: number[] = [];
    const rateA: number[] = [];
    const rateB: number[] = [];
    for (let round = 0; round < 3; round++) {
      a.push(...await serial(without, "cost", 100));
      b.push(...await serial(withLog, "cost", 100));
      rateA.push(await concurrent(without, "cost", 600, 50));
      rateB.push(await concurrent(withLog, "cost", 600, 50));
    }
    const median = (xs: number[]) => quantile(xs, 0.5);
    console.log(`changelog cost (one run, 300 serial enqueues and 3 x 600 at 50 in flight each): ` +
      `without the log p50 ${quantile(a, 0.5).toFixed(2)} ms p99 ${quantile(a, 0.99).toFixed(2)} ms, ${Math.round(median(rateA))}/s; ` +
      `with the log p50 ${quantile(b, 0.5).toFixed(2)} ms p99 ${quantile(b, 0.99).toFixed(2)} ms, ${Math.round(median(rateB))}/s; ` +
      `ratio p50 ${(quantile(b, 0.5) / quantile(a, 0.5)).toFixed(2)}x, p99 ${(quantile(b, 0.99) / quantile(a, 0.99)).toFixed(2)}x, ` +
      `throughput ${(median(rateB) / median(rateA)).toFixed(2)}x`);
    // A quorum round trip per call, batched under load: not an order of magnitude.
    expect(quantile(b, 0.5)).toBeLessThan(quantile(a, 0.5) * 10 + 10);
    expect(median(rateB)).toBeGreaterThan(median(rateA) / 10);
  });
});
