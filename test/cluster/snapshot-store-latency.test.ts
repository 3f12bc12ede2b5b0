/**
 * What a snapshot costs on the JetStream object store, R3 (3 nats-server on this
 * machine's cores, sharing them with the test): the time of a put and of a latest for a
 * 10 MB and a 50 MB snapshot (a partition's rows are several MB to tens of MB). Printed for
 * the notes; the test fails only if a snapshot does not come back byte-exact.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JetStreamChangeLog } from "../../src/changelog/jetstream-change-log.js";
import type { JetStreamSnapshotStore } from "../../src/changelog/jetstream-snapshot-store.js";
import { startNats, type NatsCluster } from "../support/nats.js";

const MB = 1_000_000;
const ROUNDS = 3;

const range = (ms: number[]) => {
  const s = [...ms].sort((a, b) => a - b);
  return `${s[0]!.toFixed(0)}-${s.at(-1)!.toFixed(0)} ms (median ${s[Math.floor(s.length / 2)]!.toFixed(0)})`;
};

describe("snapshot store cost on JetStream R3", () => {
  let nats: NatsCluster;
  let log: JetStreamChangeLog;
  let store: JetStreamSnapshotStore;
  beforeAll(async () => {
    nats = await startNats({ size: 3 });
    log = await JetStreamChangeLog.open({ servers: nats.urls, replicas: 3 });
    store = await log.openSnapshotStore({ replicas: 3 });
  }, 60_000);
  afterAll(async () => {
    await log?.close();
    await nats?.stop();
  });

  it.each([10, 50])("put and latest of a %i MB snapshot", async (mb) => {
    const partition = mb;
    const puts: number[] = [];
    const reads: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const bytes = randomBytes(mb * MB);
      let start = performance.now();
      // Each round's put also removes the previous round's snapshot.
      await store.put(partition, round, bytes);
      puts.push(performance.now() - start);
      start = performance.now();
      const got = await store.latest(partition);
      reads.push(performance.now() - start);
      expect(got?.seq).toBe(round);
      expect(bytes.equals(got!.bytes), "the snapshot read back equals the one put").toBe(true);
    }
    console.log(`[snapshot store R3] ${mb} MB: put ${range(puts)}, latest ${range(reads)} (${ROUNDS} rounds)`);
  }, 120_000);
});
