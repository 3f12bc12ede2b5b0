/**
 * What an append to the JetStream changelog costs on R3 (3 nats-server on this machine's
 * cores, sharing them with the test): p50/p99 of one append in flight on one partition,
 * of 8 partitions appending at once (one in flight each), and the throughput of group
 * commit when many turns wait on one partition. Printed for the notes; the test fails
 * only if an append is not acknowledged or grouping does not happen.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChangeLog } from "../../src/changelog/changelog.js";
import { JetStreamChangeLog } from "../../src/changelog/jetstream-change-log.js";
import { PartitionAppender } from "../../src/changelog/partition-appender.js";
import { startNats, type NatsCluster } from "../support/nats.js";

/** A record the size of a turn's effects for a small batch (~300 bytes). */
const RECORD = new Uint8Array(300).fill(7);

const percentile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
const summary = (ms: number[]) => {
  const s = [...ms].sort((a, b) => a - b);
  return `p50 ${percentile(s, 0.5).toFixed(2)} ms, p99 ${percentile(s, 0.99).toFixed(2)} ms (${s.length} appends)`;
};

/** `count` appends one after another on `partition`; their latencies in ms. */
async function sequentialAppends(log: ChangeLog, partition: number, count: number): Promise<number[]> {
  const latencies: number[] = [];
  let last = await log.lastSeq(partition);
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    const outcome = await log.append(partition, [RECORD], last);
    latencies.push(performance.now() - start);
    if (outcome.kind !== "ok") throw new Error(`append ${i} on partition ${partition}: ${JSON.stringify(outcome)}`);
    last = outcome.seq;
  }
  return latencies;
}

describe("changelog append latency on JetStream R3", () => {
  let nats: NatsCluster;
  let log: JetStreamChangeLog;
  beforeAll(async () => {
    nats = await startNats({ size: 3 });
    log = await JetStreamChangeLog.open({ servers: nats.urls, replicas: 3 });
  }, 60_000);
  afterAll(async () => {
    await log?.close();
    await nats?.stop();
  });

  it("one append in flight, then 8 partitions at once", async () => {
    await sequentialAppends(log, 100, 20); // warm-up: connection, stream leader, file blocks
    const one = await sequentialAppends(log, 0, 300);
    const eight = (await Promise.all(Array.from({ length: 8 }, (_, p) => sequentialAppends(log, 1 + p, 100)))).flat();
    console.log(`[changelog latency R3] 1 in flight: ${summary(one)}; 8 partitions at once: ${summary(eight)}`);
    expect(one).toHaveLength(300);
    expect(eight).toHaveLength(800);
  }, 60_000);

  it("group commit: 2,000 turns from 64 callers on one partition go in far fewer entries", async () => {
    const appender = new PartitionAppender(log, 200, await log.lastSeq(200));
    const start = performance.now();
    let next = 0;
    const callers = Array.from({ length: 64 }, async () => {
      while (next < 2_000) {
        next++;
        await appender.append([RECORD]);
      }
    });
    await Promise.all(callers);
    const ms = performance.now() - start;
    const entries = [];
    for (let from = 1; ;) {
      const page = await log.read(200, from, 500);
      if (page.length === 0) break;
      entries.push(...page);
      from = page.at(-1)!.seq + 1;
    }
    const turns = entries.reduce((n, e) => n + e.records.length, 0);
    console.log(`[changelog latency R3] group commit: ${turns} turns in ${entries.length} entries, ${Math.round((turns / ms) * 1000)} turns/s`);
    expect(turns).toBe(2_000);
    expect(entries.length).toBeLessThan(2_000 / 4);
  }, 60_000);
});
