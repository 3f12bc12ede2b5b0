/**
 * One contract for every SnapshotStore: the JetStream one against a real 3-server
 * nats-server cluster (R3 object store bucket, on the ChangeLog's connection) and the
 * in-memory fake. A multi-MB snapshot comes back byte-exact, the newest sequence wins and
 * the older ones are removed, partitions stay apart, bad input is refused, a put cut off
 * midway is never answered (nor is one in progress), and a loss of the store's leader
 * (kill -9 of the bucket stream's leader; an outage in the fake) pauses reads and writes,
 * which then resume with every completed snapshot intact.
 */
import { randomBytes } from "node:crypto";
import { jetstream } from "@nats-io/jetstream";
import { Base64UrlPaddedCodec } from "@nats-io/obj";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { JetStreamChangeLog } from "../../src/changelog/jetstream-change-log.js";
import type { JetStreamSnapshotStore } from "../../src/changelog/jetstream-snapshot-store.js";
import { MemorySnapshotStore } from "../../src/changelog/memory-snapshot-store.js";
import type { Snapshot, SnapshotStore } from "../../src/changelog/snapshot-store.js";
import { eventually } from "../support/node-process.js";
import { startNats, type NatsCluster } from "../support/nats.js";

/** A leader loss in progress. */
interface Disruption {
  /** Called by a reader when it first sees a call fail: the fake's outage ends there (a real cluster heals by itself). */
  failureSeen(): void;
}

interface Harness {
  /** The store the tests write through. */
  store: SnapshotStore;
  /** A second, independent client of the same store (another node). */
  other: SnapshotStore;
  /** Puts `bytes` from a writer that is cut off (its connection closed) once part of them was sent; resolves with the put's rejection. */
  interruptedPut(partition: number, seq: number, bytes: Uint8Array): Promise<unknown>;
  /** Takes the store's leader away. */
  disruptLeader(): Promise<Disruption>;
  stop(): Promise<void>;
}

const BUCKET = "CV_SNAP";

const natsHarness = async (): Promise<Harness> => {
  const nats: NatsCluster = await startNats({ size: 3 });
  const logs: JetStreamChangeLog[] = [];
  const openNode = async (name: string) => {
    const log = await JetStreamChangeLog.open({ servers: nats.urls, replicas: 3, connectionName: name });
    logs.push(log);
    return log.openSnapshotStore({ bucket: BUCKET, replicas: 3 });
  };
  let store: JetStreamSnapshotStore;
  let other: JetStreamSnapshotStore;
  try {
    store = await openNode("snapshot-contract-a");
    other = await openNode("snapshot-contract-b");
  } catch (err) {
    await Promise.all(logs.map((l) => l.close()));
    await nats.stop();
    throw err;
  }
  return {
    store,
    other,
    async interruptedPut(partition, seq, bytes) {
      const log = await JetStreamChangeLog.open({ servers: nats.urls, replicas: 3, connectionName: "snapshot-contract-cut" });
      const writer = await log.openSnapshotStore({ bucket: BUCKET });
      // Watch the chunks go by on a plain subscription: once three are out, the writer's
      // connection is closed under its put.
      const watcher = await connect({ servers: nats.urls });
      try {
        const chunks = watcher.subscribe(`$O.${BUCKET}.C.>`, { max: 3 });
        await watcher.flush();
        const put = writer.put(partition, seq, bytes).then(() => undefined, (e: unknown) => e);
        for await (const _ of chunks);
        await log.close();
        return await put;
      } finally {
        await watcher.close();
        await log.close();
      }
    },
    async disruptLeader() {
      const leader = await eventually("the snapshot bucket to have a leader", async () => (await store.leader()) || undefined, 20_000);
      await nats.server(leader).kill();
      return { failureSeen: () => undefined };
    },
    async stop() {
      await Promise.all(logs.map((l) => l.close()));
      await nats.stop();
    },
  };
};

const memoryHarness = async (): Promise<Harness> => {
  const store = new MemorySnapshotStore();
  return {
    store,
    // One store, so a second client is the same object (closing it would close the store).
    other: store,
    async interruptedPut(partition, seq, bytes) {
      // The fake has no midway: the outage takes the whole put.
      store.startOutage();
      try {
        return await store.put(partition, seq, bytes).then(() => undefined, (e: unknown) => e);
      } finally {
        store.endOutage();
      }
    },
    async disruptLeader() {
      store.startOutage();
      return { failureSeen: () => store.endOutage() };
    },
    stop: () => store.close(),
  };
};

const MiB = 1024 * 1024;
const sameBytes = (a: Uint8Array | undefined, b: Uint8Array) => !!a && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
const describeSnapshot = (s: Snapshot | undefined) => (s ? `seq ${s.seq}, ${s.bytes.byteLength} bytes` : "none");

describe.each([
  ["JetStream (3 nats-server, R3)", natsHarness],
  ["memory fake", memoryHarness],
])("SnapshotStore contract: %s", (name, makeHarness) => {
  let h: Harness;
  let nextPartition = 0;
  const partition = () => nextPartition++;

  beforeAll(async () => {
    h = await makeHarness();
  }, 60_000);
  afterAll(async () => {
    await h?.stop();
  });

  it("answers undefined and no sequences for a partition without a snapshot", async () => {
    const p = partition();
    expect(await h.store.latest(p)).toBeUndefined();
    expect(await h.store.seqs(p)).toEqual([]);
  });

  it("gives back a multi-MB snapshot byte-exact, to its writer and to another node", async () => {
    const p = partition();
    const bytes = randomBytes(12 * MiB);
    await h.store.put(p, 41, bytes);
    for (const reader of [h.store, h.other]) {
      const got = await reader.latest(p);
      expect(got?.seq).toBe(41);
      expect(got?.bytes.byteLength).toBe(bytes.byteLength);
      expect(sameBytes(got?.bytes, bytes), "the bytes read back equal the bytes put").toBe(true);
    }
  }, 60_000);

  it("answers the newest sequence and removes the older snapshots; a stale put changes nothing, one of the same sequence replaces", async () => {
    const p = partition();
    const v = [randomBytes(300_000), randomBytes(300_000), randomBytes(300_000), randomBytes(300_000), randomBytes(300_000)] as const;
    await h.store.put(p, 10, v[0]);
    await h.store.put(p, 25, v[1]);
    await h.store.put(p, 30, v[2]);
    expect(await h.store.seqs(p)).toEqual([30]);
    expect(sameBytes((await h.other.latest(p))?.bytes, v[2])).toBe(true);
    // An old owner's late put of an older sequence: accepted, never answered, nothing removed.
    await h.other.put(p, 28, v[3]);
    expect(await h.store.seqs(p)).toEqual([30]);
    const after = await h.store.latest(p);
    expect(after?.seq).toBe(30);
    expect(sameBytes(after?.bytes, v[2])).toBe(true);
    // A retried put of the same sequence replaces it.
    await h.store.put(p, 30, v[4]);
    expect(await h.store.seqs(p)).toEqual([30]);
    expect(sameBytes((await h.store.latest(p))?.bytes, v[4])).toBe(true);
  }, 60_000);

  it("keeps partitions apart: a put on one neither removes nor shows up in another", async () => {
    const [p, q] = [partition(), partition()];
    const [pb, qb] = [randomBytes(200_000), randomBytes(200_000)];
    await h.store.put(p, 5, pb);
    await h.store.put(q, 9, qb);
    await h.store.put(q, 12, qb);
    expect(await h.store.seqs(p)).toEqual([5]);
    expect(await h.store.seqs(q)).toEqual([12]);
    expect(sameBytes((await h.store.latest(p))?.bytes, pb)).toBe(true);
    expect((await h.store.latest(q))?.seq).toBe(12);
  }, 60_000);

  it("keeps its own copy: changing the buffers after the put or after a read changes nothing stored", async () => {
    const p = partition();
    const bytes = randomBytes(100_000);
    const original = Buffer.from(bytes);
    await h.store.put(p, 3, bytes);
    bytes.fill(0);
    const first = await h.store.latest(p);
    first!.bytes.fill(1);
    expect(sameBytes((await h.store.latest(p))?.bytes, original)).toBe(true);
  });

  it("refuses bad arguments with INVALID_FIELD naming the field, and changes nothing", async () => {
    const p = partition();
    const bytes = randomBytes(1_000);
    await h.store.put(p, 7, bytes);
    const other = randomBytes(1_000);
    const cases: Array<[string, () => Promise<unknown>]> = [
      ["partition", () => h.store.put(-1, 8, other)],
      ["partition", () => h.store.put(1.5, 8, other)],
      ["partition", () => h.store.latest(-1)],
      ["partition", () => h.store.seqs(Number.NaN)],
      ["seq", () => h.store.put(p, -1, other)],
      ["seq", () => h.store.put(p, 8.5, other)],
      ["seq", () => h.store.put(p, Number.NaN, other)],
      ["seq", () => h.store.put(p, 2 ** 53, other)],
      ["bytes", () => h.store.put(p, 8, new Uint8Array(0))],
      ["bytes", () => h.store.put(p, 8, "rows" as unknown as Uint8Array)],
    ];
    for (const [field, call] of cases) {
      const err = await call().then(() => undefined, (e: unknown) => e);
      expect(err, `a bad ${field}`).toBeInstanceOf(ConveyorError);
      expect(err).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field });
    }
    expect(await h.store.seqs(p)).toEqual([7]);
    expect(sameBytes((await h.store.latest(p))?.bytes, bytes)).toBe(true);
  });

  it("never answers a put in progress: a reader sees the previous snapshot, then the new one, whole", async () => {
    const p = partition();
    const [before, next] = [randomBytes(2 * MiB), randomBytes(8 * MiB)];
    await h.store.put(p, 100, before);
    let done = false;
    const put = h.store.put(p, 200, next).finally(() => (done = true));
    const seen: string[] = [];
    for (;;) {
      const finished = done;
      const got = await h.other.latest(p);
      if (got?.seq === 100 && sameBytes(got.bytes, before)) seen.push("previous");
      else if (got?.seq === 200 && sameBytes(got.bytes, next)) seen.push("new");
      else throw new Error(`a read during the put answered ${describeSnapshot(got)}, neither snapshot whole`);
      // A read begun after the put resolved must see the new snapshot.
      if (finished) break;
    }
    await put;
    expect(seen.at(-1)).toBe("new");
    expect(await h.store.seqs(p)).toEqual([200]);
    console.log(`[snapshot store ${name}] reads during an 8 MiB put: ${seen.join(", ")}`);
  }, 60_000);

  it("never answers a put cut off midway: it rejects and the previous snapshot stays the latest", async () => {
    const p = partition();
    const [before, cut] = [randomBytes(MiB), randomBytes(16 * MiB)];
    await h.store.put(p, 50, before);
    const err = await h.interruptedPut(p, 60, cut);
    expect(err, "the cut-off put rejected").toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(ConveyorError);
    const got = await h.store.latest(p);
    expect(got?.seq).toBe(50);
    expect(sameBytes(got?.bytes, before)).toBe(true);
    expect(await h.other.seqs(p)).toEqual([50]);
    // Writes go on: the owner's next put completes and removes the previous one.
    await h.store.put(p, 60, cut);
    expect(await h.store.seqs(p)).toEqual([60]);
    expect(sameBytes((await h.other.latest(p))?.bytes, cut)).toBe(true);
  }, 60_000);

  // Last: on JetStream it leaves two servers of three.
  it("survives the loss of the store's leader: a completed snapshot reads back whole afterwards, and puts resume", async () => {
    const p = partition();
    const [before, after] = [randomBytes(4 * MiB), randomBytes(4 * MiB)];
    await h.store.put(p, 1_000, before);
    const disruption = await h.disruptLeader();
    const disruptedAtMs = Date.now();
    let failures = 0;
    const failing = <T>(call: () => Promise<T>) => async () => {
      try {
        return await call();
      } catch (err) {
        failures++;
        disruption.failureSeen();
        throw err;
      }
    };
    const read = await eventually("the snapshot to read back after the leader loss", failing(() => h.other.latest(p)), 45_000);
    const readAfterMs = Date.now() - disruptedAtMs;
    expect(read.seq).toBe(1_000);
    expect(sameBytes(read.bytes, before), "the snapshot read back after the leader loss equals the one put").toBe(true);
    // A put that rejected may have stored its snapshot: retrying the same sequence is safe.
    await eventually("a put to complete after the leader loss", failing(async () => (await h.store.put(p, 2_000, after), true)), 45_000);
    const putAfterMs = Date.now() - disruptedAtMs;
    // The cluster may still be settling (a new meta leader): each read may fail, then answers.
    expect(await eventually("the partition's snapshots to be listed", failing(() => h.other.seqs(p)), 45_000)).toEqual([2_000]);
    const last = await eventually("the new snapshot to read back", failing(() => h.other.latest(p)), 45_000);
    expect(sameBytes(last?.bytes, after)).toBe(true);
    console.log(`[snapshot store ${name}] leader loss: first whole read ${readAfterMs} ms after it, a put completed ${putAfterMs} ms after it; ${failures} call(s) failed`);
  }, 120_000);
});

describe("JetStreamSnapshotStore: a put whose metadata landed after the client purged its chunks", () => {
  let nats: NatsCluster;
  let log: JetStreamChangeLog;
  let store: JetStreamSnapshotStore;
  beforeAll(async () => {
    nats = await startNats({ size: 1 });
    log = await JetStreamChangeLog.open({ servers: nats.urls, replicas: 1 });
    store = await log.openSnapshotStore({ bucket: BUCKET, replicas: 1 });
  }, 60_000);
  afterAll(async () => {
    await log?.close();
    await nats?.stop();
  });

  /** Publishes the metadata of p's snapshot at `seq` naming chunks that were never stored: what a put leaves when its last publish timed out, then landed. */
  async function landIncomplete(partition: number, seq: number): Promise<string> {
    const nc = await connect({ servers: nats.urls });
    try {
      const name = `p${partition}-s${seq}`;
      const subject = `$O.${BUCKET}.M.${Base64UrlPaddedCodec.encode(name)}`;
      const meta = { name, bucket: BUCKET, nuid: "NEVERSTOREDCHUNKS", size: 1_000, chunks: 1, digest: "SHA-256=AAAA", deleted: false, mtime: new Date().toISOString(),
        metadata: { "cv-partition": String(partition), "cv-seq": String(seq) } };
      await jetstream(nc).publish(subject, JSON.stringify(meta));
      return subject;
    } finally {
      await nc.close();
    }
  }

  it("a snapshot whose bytes do not match its digest is refused, not answered", async () => {
    const p = 2;
    await store.put(p, 400, randomBytes(300_000));
    // Another snapshot's metadata naming the same chunks, with another digest.
    const nc = await connect({ servers: nats.urls });
    try {
      const jsm = await jetstream(nc).jetstreamManager();
      const real = (await jsm.streams.getMessage(`OBJ_${BUCKET}`, { last_by_subj: `$O.${BUCKET}.M.${Base64UrlPaddedCodec.encode(`p${p}-s400`)}` }))!.json<Record<string, unknown>>();
      const forged = { ...real, name: `p${p}-s450`, digest: `SHA-256=${Buffer.alloc(32, 7).toString("base64url")}=`, metadata: { "cv-partition": String(p), "cv-seq": "450" } };
      await jetstream(nc).publish(`$O.${BUCKET}.M.${Base64UrlPaddedCodec.encode(`p${p}-s450`)}`, JSON.stringify(forged));
    } finally {
      await nc.close();
    }
    await expect(store.latest(p)).rejects.toThrow(/p2-s450 is corrupt/);
  });

  it("is never answered: latest is the newest complete snapshot, and a later put removes it", async () => {
    const p = 1;
    const [a, b, c] = [randomBytes(300_000), randomBytes(300_000), randomBytes(300_000)];
    await store.put(p, 250, a);
    const brokenSubject = await landIncomplete(p, 300);
    const first = await store.latest(p);
    expect(first?.seq).toBe(250);
    expect(sameBytes(first?.bytes, a)).toBe(true);
    expect(await store.seqs(p)).toEqual([250]);
    // An incomplete newer snapshot does not make a put stale.
    await store.put(p, 280, b);
    expect(await store.seqs(p)).toEqual([280]);
    expect(sameBytes((await store.latest(p))?.bytes, b)).toBe(true);
    // A put past it removes it with the other older ones.
    await store.put(p, 310, c);
    expect(await store.seqs(p)).toEqual([310]);
    const nc = await connect({ servers: nats.urls });
    try {
      const jsm = await jetstream(nc).jetstreamManager();
      const left = (await jsm.streams.info(`OBJ_${BUCKET}`, { subjects_filter: `$O.${BUCKET}.M.>` })).state.subjects ?? {};
      // The incomplete one's metadata is gone, not left as a deletion mark.
      expect(left[brokenSubject]).toBeUndefined();
      expect(left[`$O.${BUCKET}.M.${Base64UrlPaddedCodec.encode(`p${p}-s310`)}`]).toBe(1);
    } finally {
      await nc.close();
    }
  });
});
