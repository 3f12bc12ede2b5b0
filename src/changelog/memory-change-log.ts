/**
 * The in-memory ChangeLog: one process, no replication, but the same rules as the real
 * log (shared sequence across partitions, refusal on a wrong expected last sequence,
 * purge keeps the last entry) and the same failures on demand:
 * - an outage (`startOutage`): appends report `unknown` and the other operations reject
 *   (UNAVAILABLE / LOG_UNAVAILABLE), as while JetStream elects a stream leader; with `landing: true` the appends of the
 *   outage are stored nonetheless, as when an acknowledgement is lost rather than the write;
 * - a hold (`holdAppends`): appends wait until released, so a test can see what queues up
 *   behind an append in flight.
 */
import { ConveyorError } from "../base/errors.js";
import { checkAppend, checkMaxEntries, checkPartition, checkSeq } from "./append-checks.js";
import type { AppendOutcome, ChangeLog, EntryKind, Follower, LogEntry } from "./changelog.js";

interface Outage {
  landing: boolean;
}

export class MemoryChangeLog implements ChangeLog {
  private readonly partitions = new Map<number, LogEntry[]>();
  private lastStreamSeq = 0;
  private outage: Outage | undefined;
  private hold: Promise<void> | undefined;
  private closed = false;
  /** Followers waiting for the next entry. */
  private readonly followers = new Set<() => void>();
  /** Appends attempted, whatever their outcome (for tests of batching). */
  appendCalls = 0;

  async append(partition: number, records: readonly Uint8Array[], expectedLastSeq: number): Promise<AppendOutcome> {
    checkAppend(partition, records, expectedLastSeq);
    return this.store(partition, "records", records, expectedLastSeq);
  }

  async appendFence(partition: number, mark: Uint8Array, expectedLastSeq: number): Promise<AppendOutcome> {
    checkAppend(partition, [mark], expectedLastSeq);
    return this.store(partition, "fence", [mark], expectedLastSeq);
  }

  readonly stream = "memory";

  /** One process leads it, while it answers. */
  async leader(): Promise<string> {
    this.assertAnswering();
    return "memory";
  }

  async lastSeq(partition: number): Promise<number> {
    checkPartition(partition);
    this.assertAnswering();
    return this.entriesOf(partition).at(-1)?.seq ?? 0;
  }

  async read(partition: number, fromSeq: number, maxEntries: number): Promise<LogEntry[]> {
    checkPartition(partition);
    checkSeq("fromSeq", fromSeq, 1);
    checkMaxEntries(maxEntries);
    this.assertAnswering();
    return this.entriesOf(partition)
      .filter((e) => e.seq >= fromSeq)
      .slice(0, maxEntries)
      .map((e) => ({ ...e, records: e.records.map((r) => r.slice()) }));
  }

  async purgeBelow(partition: number, belowSeq: number): Promise<number> {
    checkPartition(partition);
    checkSeq("belowSeq", belowSeq, 1);
    this.assertAnswering();
    const entries = this.entriesOf(partition);
    const last = entries.at(-1)?.seq ?? 0;
    const kept = entries.filter((e) => e.seq >= belowSeq || e.seq === last);
    this.partitions.set(partition, kept);
    return entries.length - kept.length;
  }

  follow(partition: number, afterSeq: number, onEntry: (entry: LogEntry, pending: number) => void | Promise<void>): Follower {
    checkPartition(partition);
    checkSeq("afterSeq", afterSeq, 0);
    let stopped = false;
    let wake = () => {};
    const run = async () => {
      // Never within the call, as a real follower's first entry comes from the network.
      await Promise.resolve();
      let after = afterSeq;
      while (!stopped) {
        // An outage delivers nothing (as a follower that lost its leader) until it ends.
        const next = this.outage || this.closed ? undefined : this.entriesOf(partition).find((e) => e.seq > after);
        if (!next) {
          await new Promise<void>((resolve) => {
            wake = resolve;
            this.followers.add(resolve);
          });
          continue;
        }
        const pending = this.entriesOf(partition).filter((e) => e.seq > next.seq).length;
        await onEntry({ ...next, records: next.records.map((r) => r.slice()) }, pending);
        after = next.seq;
      }
    };
    const done = run();
    done.catch(() => {});
    return {
      stopped: done,
      stop: async () => {
        stopped = true;
        this.followers.delete(wake);
        wake();
        await done.catch(() => {});
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wakeFollowers();
  }

  /** From now on appends report `unknown` ("no_quorum") and reads reject, until `endOutage`. */
  startOutage(options: { landing?: boolean } = {}): void {
    this.outage = { landing: options.landing ?? false };
  }

  endOutage(): void {
    this.outage = undefined;
    this.wakeFollowers();
  }

  /** Appends wait (before deciding their outcome) until the returned function is called. */
  holdAppends(): () => void {
    let release!: () => void;
    this.hold = new Promise((resolve) => (release = resolve));
    return () => {
      this.hold = undefined;
      release();
    };
  }

  private async store(partition: number, kind: EntryKind, records: readonly Uint8Array[], expectedLastSeq: number): Promise<AppendOutcome> {
    this.appendCalls++;
    // Copied at the call, as a real client serialises at the call: later changes to the caller's buffers do not leak in.
    const copies = records.map((r) => r.slice());
    while (this.hold) await this.hold;
    if (this.closed) return { kind: "unknown", reason: "unavailable", detail: "memory changelog closed" };
    const entries = this.entriesOf(partition);
    const last = entries.at(-1)?.seq ?? 0;
    if (this.outage && !this.outage.landing) return { kind: "unknown", reason: "no_quorum", detail: "memory changelog outage" };
    if (last !== expectedLastSeq) {
      if (this.outage) return { kind: "unknown", reason: "no_quorum", detail: "memory changelog outage" };
      return { kind: "fenced", lastSeq: last, detail: `wrong last sequence: ${last}` };
    }
    const seq = ++this.lastStreamSeq;
    entries.push({ seq, kind, records: copies, prevSeq: expectedLastSeq });
    this.partitions.set(partition, entries);
    this.wakeFollowers();
    if (this.outage) return { kind: "unknown", reason: "no_quorum", detail: "memory changelog outage (the entry was stored)" };
    return { kind: "ok", seq };
  }

  private wakeFollowers(): void {
    const waiting = [...this.followers];
    this.followers.clear();
    for (const wake of waiting) wake();
  }

  private entriesOf(partition: number): LogEntry[] {
    return this.partitions.get(partition) ?? [];
  }

  private assertAnswering(): void {
    // As the JetStream log: a read it cannot answer now is UNAVAILABLE, for the caller to retry.
    if (this.closed) throw new ConveyorError("UNAVAILABLE", "LOG_UNAVAILABLE", "the changelog did not answer (memory changelog closed); retry");
    if (this.outage) throw new ConveyorError("UNAVAILABLE", "LOG_UNAVAILABLE", "the changelog did not answer (memory changelog outage: no leader); retry");
  }
}
