/**
 * Group commit at the log, for one partition: at most one append in flight; the turns
 * that arrive meanwhile wait and go together as the next entry (their records
 * concatenated in arrival order). One round trip to the log's quorum then acknowledges
 * many turns, the way one SQLite transaction commits many grain turns.
 *
 * A turn's records are never split across entries (a turn is atomic in the log as in
 * SQLite); only whole turns are grouped, up to `maxRecords` records and `maxBytes`
 * framed bytes per entry.
 *
 * After a failed append the appender stops: every waiting turn is refused with the same
 * outcome (none of them was sent), and so is every later one.
 * - `fenced`: another owner wrote; this node has lost the partition for good.
 * - `unknown`: the entry may yet appear. The owner must re-read the partition's tail
 *   (replaying whatever is there as written) and call `resume` with the last sequence it
 *   read before appending again.
 */
import { ConveyorError, invalidField } from "../base/errors.js";
import { ENTRY_BYTES_MAX, type AppendOutcome, type ChangeLog } from "./changelog.js";
import { framedBytes } from "./entry-frame.js";

export type FailedOutcome = Exclude<AppendOutcome, { kind: "ok" }>;

/** A turn refused because the append it went with (or an earlier one) failed. */
export class AppendFailed extends Error {
  constructor(readonly partition: number, readonly outcome: FailedOutcome) {
    super(`changelog append to partition ${partition} ${outcome.kind}${outcome.kind === "unknown" ? ` (${outcome.reason})` : ""}: ${outcome.detail}`);
    this.name = "AppendFailed";
  }
}

export interface GroupLimits {
  /** Records per entry at most (default 1,000). */
  maxRecords: number;
  /** Framed bytes per entry at most (default ENTRY_BYTES_MAX). */
  maxBytes: number;
}

interface Waiting {
  records: readonly Uint8Array[];
  resolve: (seq: number) => void;
  reject: (err: unknown) => void;
  /** A seal was placed after this turn: no later turn goes in its entry. */
  cut?: boolean;
}

export type AppenderState = "open" | "fenced" | "unknown";

export class PartitionAppender {
  private readonly waiting: Waiting[] = [];
  private inFlight = false;
  /** The turns of the append in flight. */
  private sending: Waiting[] = [];
  private failure: FailedOutcome | undefined;
  private last: number;
  private readonly limits: GroupLimits;

  constructor(private readonly log: ChangeLog, readonly partition: number, lastSeq: number, limits: Partial<GroupLimits> = {}) {
    this.last = lastSeq;
    this.limits = { maxRecords: limits.maxRecords ?? 1_000, maxBytes: limits.maxBytes ?? ENTRY_BYTES_MAX };
  }

  /** The last sequence this appender knows the partition to have (its own last entry). */
  get lastSeq(): number {
    return this.last;
  }

  get state(): AppenderState {
    return this.failure?.kind ?? "open";
  }

  /** Resolves with the sequence of the entry that holds `records` once the log acknowledged it. */
  append(records: readonly Uint8Array[]): Promise<number> {
    if (records.length === 0) return Promise.reject(invalidField("records", "a turn appends at least one record"));
    if (this.failure) return Promise.reject(new AppendFailed(this.partition, this.failure));
    return new Promise((resolve, reject) => {
      this.waiting.push({ records, resolve, reject });
      this.pump();
    });
  }

  /**
   * Places a boundary after every turn appended so far: no later turn goes in the same
   * entry as any of them. Resolves with the sequence of the entry that ends with the last
   * of them (the last sequence now if none waits or is in flight), so the partition's
   * state as of this call is exactly the log up to that sequence: what a snapshot taken
   * in the same tick is at. Rejects if that entry's append fails.
   */
  seal(): Promise<number> {
    if (this.failure) return Promise.reject(new AppendFailed(this.partition, this.failure));
    const last = this.waiting.at(-1) ?? this.sending.at(-1);
    if (!last) return Promise.resolve(this.last);
    last.cut = true;
    return new Promise((resolve, reject) => {
      const [resolved, rejected] = [last.resolve, last.reject];
      last.resolve = (seq) => {
        resolved(seq);
        resolve(seq);
      };
      last.reject = (err) => {
        rejected(err);
        reject(err);
      };
    });
  }

  /** After an `unknown`: appends go on from `lastSeq`, the partition's tail as re-read from the log. */
  resume(lastSeq: number): void {
    if (this.failure?.kind === "fenced") throw new Error(`partition ${this.partition} is fenced: it cannot resume`);
    if (this.inFlight) throw new Error(`partition ${this.partition} has an append in flight: resume only after it failed`);
    this.failure = undefined;
    this.last = lastSeq;
    this.pump();
  }

  private pump(): void {
    if (this.inFlight || this.failure || this.waiting.length === 0) return;
    const batch = this.takeBatch();
    this.inFlight = true;
    void this.send(batch);
  }

  /** The longest prefix of the waiting turns that fits the limits (at least one turn). */
  private takeBatch(): Waiting[] {
    let records = 0;
    let bytes = 4;
    let n = 0;
    for (const w of this.waiting) {
      const r = w.records.length;
      const b = framedBytes(w.records) - 4;
      if (n > 0 && (records + r > this.limits.maxRecords || bytes + b > this.limits.maxBytes)) break;
      records += r;
      bytes += b;
      n++;
      if (w.cut) break;
    }
    return this.waiting.splice(0, n);
  }

  private async send(batch: Waiting[]): Promise<void> {
    let outcome: AppendOutcome;
    this.sending = batch;
    try {
      outcome = await this.log.append(this.partition, batch.flatMap((w) => w.records), this.last);
    } catch (err) {
      this.inFlight = false;
      this.sending = [];
      // Bad input is refused before anything is sent; anything else leaves the outcome unknown.
      if (!(err instanceof ConveyorError && err.code === "INVALID_ARGUMENT")) {
        this.fail({ kind: "unknown", reason: "unavailable", detail: err instanceof Error ? err.message : String(err) }, []);
      }
      for (const w of batch) w.reject(err);
      this.pump();
      return;
    }
    this.inFlight = false;
    this.sending = [];
    if (outcome.kind === "ok") {
      this.last = outcome.seq;
      for (const w of batch) w.resolve(outcome.seq);
      this.pump();
      return;
    }
    this.fail(outcome, batch);
  }

  private fail(outcome: FailedOutcome, batch: Waiting[]): void {
    this.failure = outcome;
    const refused = [...batch, ...this.waiting.splice(0)];
    for (const w of refused) w.reject(new AppendFailed(this.partition, outcome));
  }
}
