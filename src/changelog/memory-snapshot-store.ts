/**
 * The in-memory SnapshotStore: one process, no replication, but the same rules as the
 * JetStream one (the newest sequence wins, a completed put removes the older snapshots,
 * a stale put changes nothing) and the same failures on demand: during an outage
 * (`startOutage`) every operation rejects, as while JetStream elects a stream leader;
 * with `landing: true` a put is stored nonetheless, as when its acknowledgement is lost
 * rather than the write.
 */
import { checkPartition } from "./append-checks.js";
import { checkSnapshotPut } from "./snapshot-checks.js";
import type { Snapshot, SnapshotStore } from "./snapshot-store.js";

interface Outage {
  landing: boolean;
}

export class MemorySnapshotStore implements SnapshotStore {
  /** Per partition, its snapshots by ascending sequence (one at rest). */
  private readonly partitions = new Map<number, Snapshot[]>();
  private outage: Outage | undefined;
  private closed = false;

  async put(partition: number, seq: number, bytes: Uint8Array): Promise<void> {
    checkSnapshotPut(partition, seq, bytes);
    this.assertOpen();
    if (this.outage && !this.outage.landing) throw new Error("memory snapshot store outage: no leader");
    const kept = this.snapshotsOf(partition);
    if (!kept.some((s) => s.seq > seq)) {
      // Copied (not slice(): on a Buffer that is a view): the caller may reuse its buffer once put has settled.
      this.partitions.set(partition, [{ seq, bytes: new Uint8Array(bytes) }]);
    }
    if (this.outage) throw new Error("memory snapshot store outage: no leader (the snapshot was stored)");
  }

  async latest(partition: number): Promise<Snapshot | undefined> {
    checkPartition(partition);
    this.assertAnswering();
    const newest = this.snapshotsOf(partition).at(-1);
    return newest && { seq: newest.seq, bytes: new Uint8Array(newest.bytes) };
  }

  async seqs(partition: number): Promise<number[]> {
    checkPartition(partition);
    this.assertAnswering();
    return this.snapshotsOf(partition).map((s) => s.seq);
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  /** From now on every operation rejects, until `endOutage`; with `landing`, puts are stored before they reject. */
  startOutage(options: { landing?: boolean } = {}): void {
    this.outage = { landing: options.landing ?? false };
  }

  endOutage(): void {
    this.outage = undefined;
  }

  private snapshotsOf(partition: number): Snapshot[] {
    return this.partitions.get(partition) ?? [];
  }

  private assertOpen(): void {
    if (this.closed) throw new Error("memory snapshot store closed");
  }

  private assertAnswering(): void {
    this.assertOpen();
    if (this.outage) throw new Error("memory snapshot store outage: no leader");
  }
}
