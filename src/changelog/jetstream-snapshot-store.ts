/**
 * The SnapshotStore on the NATS JetStream object store (@nats-io/obj 3.4.0 on Debian's
 * nats-server 2.9.10: the object store needs 2.6.3, its bucket's `allow_direct` 2.9;
 * batched publishes, 2.12, are not used). One bucket (`CV_SNAP`, stream `OBJ_CV_SNAP`,
 * file storage, R3 by default) holds every partition's snapshots, one object per
 * (partition, sequence), `p<p>-s<seq>`, with both also in the object's metadata.
 * The client writes (chunks of 128 KiB, a SHA-256 digest, the metadata last); reads are
 * leader gets of the same layout (snapshot-objects.ts says why not the client's).
 *
 * Why an object per (partition, sequence), not one per partition that each put replaces:
 * - The client publishes an object's chunks, then its metadata message (with a rollup
 *   header: the subject keeps that message only). If that last publish times out but
 *   lands later, the client has already purged the new chunks; with one name per
 *   partition the landed metadata would have replaced the previous snapshot's, leaving
 *   the partition no readable snapshot while its log was purged below the previous one.
 *   With a name per sequence the previous snapshot stays until a later put completes,
 *   and `latest` skips an incomplete one.
 * - `latest` is the highest sequence among complete snapshots, so a stale put (an old
 *   owner, a late retry) cannot replace a newer snapshot: no compare-and-set needed.
 * The cost: a put or latest lists the bucket's metadata subjects (one STREAM.INFO; at
 * rest one object per partition).
 *
 * The store runs on the ChangeLog's connection (`JetStreamChangeLog.openSnapshotStore`):
 * one NATS connection per node; closing the log closes it.
 */
import { jetstream } from "@nats-io/jetstream";
import { Objm, setSha256Backend, StorageType, type ObjectStore } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";
import { checkPartition } from "./append-checks.js";
import { checkSnapshotPut } from "./snapshot-checks.js";
import { snapshotName, SnapshotObjects, type ListedSnapshot } from "./snapshot-objects.js";
import type { Snapshot, SnapshotStore } from "./snapshot-store.js";

export interface JetStreamSnapshotStoreOptions {
  /** The object store bucket (default CV_SNAP; its stream is OBJ_<bucket>). */
  bucket?: string;
  /** The bucket's replicas when this client creates it (default 3). */
  replicas?: number;
  /** How long one request (a chunk's publish, a get, a purge) waits (default 5 s). */
  requestTimeoutMs?: number;
}

const PARTITION_KEY = "cv-partition";
const SEQ_KEY = "cv-seq";
/** Listings latest starts from before it gives up because what it listed keeps being removed under it by newer puts. */
const LIST_ATTEMPTS = 3;

export class JetStreamSnapshotStore implements SnapshotStore {
  private closed = false;

  private constructor(
    private readonly objects: ObjectStore,
    private readonly layout: SnapshotObjects,
  ) {}

  /** Opens the store on an existing connection, creating the bucket if it is missing (an existing one is used as it is). */
  static async open(nc: NatsConnection, options: JetStreamSnapshotStoreOptions = {}): Promise<JetStreamSnapshotStore> {
    // The client hashes every chunk it writes. Its default is pure JS, ~1 s more per 50 MB
    // here; node:crypto is always there on Node. The setting is process-wide, and this is
    // the process's only object store user.
    setSha256Backend("native");
    const bucket = options.bucket ?? "CV_SNAP";
    const js = jetstream(nc, { timeout: options.requestTimeoutMs ?? 5_000 });
    const objects = await new Objm(js).create(bucket, {
      description: "conveyor partition snapshots (issue 14)",
      replicas: options.replicas ?? 3,
      storage: StorageType.File,
    });
    return new JetStreamSnapshotStore(objects, new SnapshotObjects(await js.jetstreamManager(), bucket));
  }

  get bucket(): string {
    return this.layout.bucket;
  }

  async put(partition: number, seq: number, bytes: Uint8Array): Promise<void> {
    checkSnapshotPut(partition, seq, bytes);
    await this.answering(`put of partition ${partition} at seq ${seq}`, async () => {
      const listed = await this.layout.list(partition);
      for (const newer of listed.filter((s) => s.seq > seq)) {
        if (await this.isComplete(newer)) return;
      }
      // A snapshot of the same sequence has the same name: the client replaces it (a retried put).
      await this.objects.putBlob({ name: snapshotName(partition, seq), metadata: { [PARTITION_KEY]: String(partition), [SEQ_KEY]: String(seq) } }, bytes);
      // Stored, and the newest. If removing the older ones fails the put still rejects
      // (the caller retries, or the next put removes them), so that a resolved put means
      // "the partition's only snapshot".
      try {
        for (const older of listed.filter((s) => s.seq < seq)) await this.layout.remove(older);
      } catch (err) {
        throw new Error(`stored, but removing the older snapshots failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
    });
  }

  async latest(partition: number): Promise<Snapshot | undefined> {
    checkPartition(partition);
    return this.answering(`latest of partition ${partition}`, async () => {
      // Incomplete snapshots that nothing newer is removing: a put whose metadata landed
      // after its chunks were purged. They never complete, so the next older is the answer.
      const broken = new Set<string>();
      for (let round = 1; round <= LIST_ATTEMPTS; round++) {
        let relist = false;
        for (const listed of (await this.layout.list(partition)).filter((s) => !broken.has(s.name))) {
          const bytes = await this.layout.fetch(listed);
          if (bytes instanceof Uint8Array) return { seq: listed.seq, bytes };
          // Missed. If a newer snapshot exists now, its put completed after our listing and
          // is removing this one: answer from a new listing, never with an older snapshot
          // (the log may already be purged below the newer one).
          const now = await this.layout.list(partition);
          if (bytes === "removed" || now.some((s) => s.seq > listed.seq && !broken.has(s.name))) {
            relist = true;
            break;
          }
          broken.add(listed.name);
        }
        if (!relist) return undefined;
      }
      throw new Error(`the partition's snapshots were removed while being read, ${LIST_ATTEMPTS} times: newer puts keep completing`);
    });
  }

  async seqs(partition: number): Promise<number[]> {
    checkPartition(partition);
    return this.answering(`seqs of partition ${partition}`, async () => {
      const out: number[] = [];
      for (const listed of await this.layout.list(partition)) if (await this.isComplete(listed)) out.push(listed.seq);
      return out.sort((a, b) => a - b);
    });
  }

  /** The bucket stream's leader ("" while it has none), for status and for tests. */
  async leader(): Promise<string> {
    return (await this.objects.status()).streamInfo.cluster?.leader ?? "";
  }

  /** Stops using the store; the connection is the ChangeLog's and stays open. */
  async close(): Promise<void> {
    this.closed = true;
  }

  private async isComplete(listed: ListedSnapshot): Promise<boolean> {
    const info = await this.layout.info(listed.name);
    return !!info && (await this.layout.complete(info));
  }

  /** Runs a request, rejecting with what was asked and why it failed. */
  private async answering<T>(what: string, op: () => Promise<T>): Promise<T> {
    if (this.closed) throw new Error(`snapshot store: ${what}: the store is closed`);
    try {
      return await op();
    } catch (err) {
      throw new Error(`snapshot store: ${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}
