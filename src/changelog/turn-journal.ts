/**
 * Every committed grain turn of a partition this node holds, on the partition's
 * changelog (issue 14), before the turn's callers are answered.
 *
 * Order of durability: SQLite first, then the log. A turn is recorded while it runs
 * (inside the group-commit transaction), sent to its partition's appender only once the
 * SQLite transaction committed, and its callers wait for both (`flushed`). So the log
 * never holds a turn the owner's own file rolled back: the owner's rows are always the
 * log's entries plus, at most, turns whose append is in flight or failed. Such a turn
 * was never acknowledged (its callers got an error and retry with the same ids).
 *
 * One appender per partition (partition-appender.ts: one append in flight, later turns
 * batched behind it). A partition is `open` only after this node fenced the log at its
 * claim: it read the last sequence and appended a fence entry expecting it, so every
 * later append of a previous owner is refused (`open`).
 *
 * A failed append stops the partition's appends until `recover` re-reads the log's tail:
 * - `unknown` (a timeout, no quorum, the connection down): the entry may have landed.
 *   Whatever follows this node's last acknowledged sequence is read back; records of ours
 *   found there landed, the rest are appended again (the bytes are kept until then), and
 *   appends resume. Callers of the failed turns got UNAVAILABLE meanwhile.
 * - `fenced`, or a fence entry found in the tail: another node owns the partition now.
 *   The partition is closed here; its callers get UNAVAILABLE / FENCED and their SDKs
 *   retry, reaching the new owner.
 */
import { ConveyorError } from "../base/errors.js";
import type { ChangeLog, LogEntry } from "./changelog.js";
import { AppendFailed, PartitionAppender } from "./partition-appender.js";

/** What the journal reports (metrics, logs). */
export interface JournalEvents {
  appended?(partition: number, turns: number, ms: number): void;
  failed?(partition: number, reason: "fenced" | "timeout" | "no_quorum" | "unavailable"): void;
  recovered?(partition: number, reappended: number): void;
  closed?(partition: number, why: string): void;
}

export interface TurnJournalOptions {
  log: ChangeLog;
  /** The node writing (named in its fence entries). */
  nodeId: string;
  partitionOf(queue: string): number;
  now(): number;
  events?: JournalEvents;
}

interface Pending {
  partition: number;
  record: Uint8Array;
  /** The write (Database.write call) that recorded it: undone writes drop their records. */
  writeId: number;
}

interface OpenPartition {
  appender: PartitionAppender;
  /** The last turn's append: its callers, and every earlier turn's, wait for it. */
  last: Promise<void>;
  /** Records sent but not yet acknowledged, in order (what `recover` may have to send again). */
  unacked: Uint8Array[];
  /** Records whose append failed (or that came while recovering), in order, until recovery appended them. */
  failed: Uint8Array[];
  recovering: Promise<void> | undefined;
  epoch: number;
}

/** A write to a partition whose log is not open here (not fenced by this node, or lost). */
export const logNotOpen = (partition: number, why: string) =>
  new ConveyorError("UNAVAILABLE", "FENCED", `partition ${partition}'s changelog is not open on this node (${why}); retry`);

const logFailed = (partition: number, err: unknown) =>
  err instanceof AppendFailed && err.outcome.kind === "fenced"
    ? new ConveyorError("UNAVAILABLE", "FENCED", `partition ${partition} was taken over by another node (its changelog is fenced); retry`)
    : new ConveyorError("UNAVAILABLE", "LOG_UNAVAILABLE", `partition ${partition}'s changelog did not acknowledge the write (${err instanceof Error ? err.message : String(err)}); retry`);

export class TurnJournal {
  private pending: Pending[] = [];
  private readonly open = new Map<number, OpenPartition>();
  private readonly lost = new Map<number, string>();

  constructor(private readonly options: TurnJournalOptions) {}

  /**
   * Is `p`'s log fenced by this node and writable, at the claim of `epoch` when given? A
   * partition opened at an earlier claim stays here until an append finds it fenced, also
   * after another node took it over (this node paused or cut off past its lease): that
   * earlier opening does not make a later claim's log open.
   */
  isOpen(p: number, epoch?: number): boolean {
    const open = this.open.get(p);
    return open !== undefined && (epoch === undefined || open.epoch === epoch);
  }

  /**
   * Claims `p`'s log for this node at `epoch`: reads its last sequence, lets `catchUp`
   * bring this node's rows of p to it (a takeover replays what the previous owner
   * acknowledged), and appends a fence entry expecting it. Resolves once the fence is
   * stored; from then on a previous owner's appends are refused. If one slipped in between
   * the read and the fence, it is caught up too and the fence tried again. Rejects
   * (retryable) when the log cannot be reached.
   */
  async openPartition(p: number, epoch: number, mark: Uint8Array, catchUp: (lastSeq: number) => Promise<void> = async () => {}): Promise<void> {
    const current = this.open.get(p);
    if (current && current.epoch === epoch) return;
    const { log } = this.options;
    for (let attempt = 0; attempt < FENCE_ATTEMPTS; attempt++) {
      const last = await log.lastSeq(p);
      await catchUp(last);
      const outcome = await log.appendFence(p, mark, last);
      if (outcome.kind === "ok") {
        this.open.set(p, { appender: new PartitionAppender(log, p, outcome.seq), last: Promise.resolve(), unacked: [], failed: [], recovering: undefined, epoch });
        this.lost.delete(p);
        return;
      }
      // Someone appended between our read and our fence (the old owner's last turns): read again.
      if (outcome.kind === "unknown") throw new ConveyorError("UNAVAILABLE", "LOG_UNAVAILABLE", `could not fence partition ${p}'s changelog (${outcome.detail}); retry`);
    }
    throw new ConveyorError("UNAVAILABLE", "LOG_UNAVAILABLE", `partition ${p}'s changelog kept moving while this node fenced it; retry`);
  }

  /** The sequence of p's last entry this node appended (its fence or its last acknowledged turns); undefined when p is not open here. */
  lastSeq(p: number): number | undefined {
    return this.open.get(p)?.appender.lastSeq;
  }

  /**
   * The log sequence that p's committed state as of this call will be at: every turn of p
   * committed so far, and none committed later, is in the log's entries up to it (the
   * appender seals its queue here). Undefined while p cannot say (not open here, or
   * recovering from a failed append). A snapshot read in the same tick is at that sequence.
   */
  seal(p: number): Promise<number> | undefined {
    const open = this.open.get(p);
    if (!open || open.recovering || open.failed.length > 0) return undefined;
    const sealed = open.appender.seal();
    sealed.catch(() => {});
    return sealed;
  }

  /** This node no longer holds `p` (handed off, or lost): later writes to it are refused. */
  closePartition(p: number, why: string): void {
    if (!this.open.delete(p)) return;
    this.lost.set(p, why);
    this.options.events?.closed?.(p, why);
  }

  /** Records a turn of `queue` (called inside the turn's write, after its effects were applied). */
  record(queue: string, record: Uint8Array, writeId: number): void {
    this.pending.push({ partition: this.options.partitionOf(queue), record, writeId });
  }

  /** The write `writeId` was undone (its savepoint rolled back): its turns never happened. */
  undone(writeId: number): void {
    this.pending = this.pending.filter((p) => p.writeId !== writeId);
  }

  /** The SQLite transaction rolled back: none of its turns happened. */
  rolledBack(): void {
    this.pending = [];
  }

  /** The SQLite transaction committed: its turns go to their partitions' appenders, in order. */
  committed(): void {
    const turns = this.pending;
    this.pending = [];
    for (const turn of turns) this.send(turn.partition, turn.record);
  }

  /** Resolves once every turn of `p` committed so far is on the log; rejects (UNAVAILABLE) if one could not be. */
  flushed(p: number): Promise<void> {
    const open = this.open.get(p);
    if (open) return open.last;
    const why = this.lost.get(p);
    return why === undefined ? Promise.resolve() : Promise.reject(logNotOpen(p, why));
  }

  /** Closes every partition (the node stops); appends in flight still settle. */
  closeAll(why: string): void {
    for (const p of [...this.open.keys()]) this.closePartition(p, why);
  }

  private send(p: number, record: Uint8Array): void {
    const open = this.open.get(p);
    if (!open) {
      // A turn of a partition this node does not hold on the log. Ownership is checked
      // before every turn, so this is a race with a loss; `flushed` refuses its callers.
      if (!this.lost.has(p)) this.lost.set(p, "not claimed on the log");
      return;
    }
    if (open.recovering) {
      // Appends are stopped until recovery: it appends this turn too, in order.
      open.failed.push(record);
      open.last = this.afterRecovery(p, open);
      return;
    }
    open.unacked.push(record);
    const startedAt = this.options.now();
    const appended = open.appender.append([record]).then(
      () => {
        open.unacked.splice(open.unacked.indexOf(record), 1);
        this.options.events?.appended?.(p, 1, this.options.now() - startedAt);
      },
      (err: unknown) => {
        this.onFailure(p, open, err);
        throw logFailed(p, err);
      });
    appended.catch(() => {});
    open.last = appended;
  }

  private onFailure(p: number, open: OpenPartition, err: unknown): void {
    if (this.open.get(p) !== open) return;
    const fencedOut = err instanceof AppendFailed && err.outcome.kind === "fenced";
    if (!open.recovering) this.options.events?.failed?.(p, err instanceof AppendFailed ? (err.outcome.kind === "fenced" ? "fenced" : err.outcome.reason) : "unavailable");
    if (fencedOut) {
      this.closePartition(p, "another node fenced its changelog");
      return;
    }
    // Everything not acknowledged may or may not be on the log: recover before more.
    open.failed.push(...open.unacked);
    open.unacked = [];
    if (!open.recovering) {
      open.recovering = this.recover(p, open).finally(() => {
        open.recovering = undefined;
      });
    }
  }

  /** A turn recorded while `p` recovers: durable once recovery has appended it. */
  private afterRecovery(p: number, open: OpenPartition): Promise<void> {
    const done = (open.recovering ?? Promise.resolve()).then(() => {
      if (this.open.get(p) !== open) throw logNotOpen(p, this.lost.get(p) ?? "closed");
    });
    done.catch(() => {});
    return done;
  }

  /**
   * After an append failed: reads what follows this node's last acknowledged entry. A
   * fence there means another owner: close. Records of ours found there landed; the
   * rest (and turns recorded meanwhile) are appended again, in order; then appends
   * resume. Retried until it works or the partition is closed.
   *
   * It ends, touching nothing, once `open` is no longer p's entry: this node may have
   * claimed p again meanwhile, at a new epoch (cut off past its lease, taken over, then
   * given p back), and the fences this recovery then reads include that claim's own.
   * Closing p then closed the new claim's log: the network fault test found every later
   * write of that partition refused FENCED on a node that held it.
   */
  private async recover(p: number, open: OpenPartition): Promise<void> {
    const { log } = this.options;
    let acked = open.appender.lastSeq;
    let reappended = 0;
    /** Every record read back since the last acknowledged entry: each read starts after the one before, and a record that landed must not go again. */
    const landed: Uint8Array[] = [];
    const current = () => this.open.get(p) === open;
    while (current()) {
      try {
        const entries = await log.read(p, acked + 1, 1_000);
        if (!current()) return;
        // A fence means another owner; so does a gap (entries that do not continue from this
        // node's last acknowledged one): a later owner's snapshot purged them, its fence
        // included. This node never purges past its own last acknowledged entry.
        if (entries.some((e) => e.kind === "fence") || !continues(entries, acked)) {
          this.closePartition(p, "another node fenced its changelog");
          return;
        }
        for (const entry of entries) landed.push(...entry.records);
        acked = entries.at(-1)?.seq ?? acked;
        const batch = open.failed.slice();
        const missing = batch.filter((r) => !landed.some((l) => sameBytes(l, r)));
        if (missing.length > 0) {
          const outcome = await log.append(p, missing, acked);
          if (!current()) return;
          if (outcome.kind === "fenced") {
            this.closePartition(p, "another node fenced its changelog");
            return;
          }
          if (outcome.kind === "unknown") continue; // read again: it may have landed
          acked = outcome.seq;
          reappended += missing.length;
        }
        open.failed.splice(0, batch.length);
        // Turns recorded while this ran go around once more.
        if (open.failed.length > 0) continue;
        open.appender.resume(acked);
        this.options.events?.recovered?.(p, reappended);
        return;
      } catch {
        // The log cannot answer yet: try again shortly.
        await new Promise((r) => setTimeout(r, RECOVERY_RETRY_MS));
      }
    }
  }
}

/** Fences tried while a previous owner keeps appending (it stops within its lease's TTL: its keep-alives fail). */
const FENCE_ATTEMPTS = 10;

/** How soon recovery asks the log again after it could not answer. */
const RECOVERY_RETRY_MS = 250;

/** Does each entry follow the one before it, the first following `from`? (An entry that does not name its predecessor is taken as following.) */
function continues(entries: readonly LogEntry[], from: number): boolean {
  let prev = from;
  for (const entry of entries) {
    if (entry.prevSeq !== undefined && entry.prevSeq !== prev) return false;
    prev = entry.seq;
  }
  return true;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
