/**
 * Plain pending tasks packed into columns (a struct of arrays): one slot per task, each
 * field in a typed array, strings and per-type settings shared. A packed task costs its
 * id, a Map entry and about 40 bytes of columns, where an index entry object
 * (TaskIndexEntry, with its ready item) costs about four hundred: what lets one queue hold
 * a backlog of millions.
 *
 * Which tasks: pending, outside any group or batch, without rules and with no attempt
 * running or remembered on the entry (`packable`); anything else stays an object, so the
 * parts that look at groups, rules and leases only ever see objects. A packed task is
 * unpacked (turned back into an entry, field for field) the moment a part asks for it.
 *
 * Three ways of keeping columns small: a task's type, retries and backoff, which tasks
 * of one type nearly always share, are one interned *profile*; its concurrency key is
 * interned; and the fields most tasks leave at zero (timeout, deadline, expiry, unique
 * key and TTL, retries used, attempts started) have a column only once some task sets
 * them.
 *
 * A slot is in use while its task is packed here or while a dispatch heap (`SlotHeap` in
 * ready-queues.ts) still holds it: a heap orders slots by their priority and seq columns,
 * and deletes lazily, like the object heaps. The slot is freed when both have let go.
 */
import { InternTable } from "./intern-table.js";
import { indexEntry, type TaskIndexEntry } from "./task.js";

/** The task is packed in this slot (the index maps its id here). */
const PACKED = 1;
/** A dispatch heap holds this slot. */
const ORDERED = 2;
const INITIAL_CAPACITY = 16;
/** From this many slots on, columns grow by a quarter instead of doubling. */
const GENTLE_GROWTH_FROM = 65_536;

const isInt32 = (v: number): boolean => Object.is(v | 0, v);

/**
 * Whether `e` can be packed without losing anything: the columns hold every field a
 * plain pending entry can have, and the int32 columns only integers that fit.
 */
export function packable(e: TaskIndexEntry): boolean {
  return e.state === "pending" && e.batchId === "" && e.group === "" && e.rules.length === 0
    && e.leaseId === "" && e.leaseExpiresAtMs === 0 && e.attemptEndsAtMs === 0 && e.attemptStartedAtMs === 0 && e.attemptWorker === ""
    && isInt32(e.priority) && isInt32(e.retried) && isInt32(e.maxRetry) && isInt32(e.attemptNumber) && isInt32(e.payloadBytes);
}

export class PackedTasks {
  private capacity = INITIAL_CAPACITY;
  private used = 0;
  private readonly free: number[] = [];
  private readonly profiles = new Profiles();
  private readonly keys = new InternTable();
  private ids: Array<string | undefined> = [];
  private flags = new Uint8Array(INITIAL_CAPACITY);
  private seqs = new Float64Array(INITIAL_CAPACITY);
  private readyAts = new Float64Array(INITIAL_CAPACITY);
  private profileCodes = new Int32Array(INITIAL_CAPACITY);
  private keyCodes = new Int32Array(INITIAL_CAPACITY);
  private priorities = new Int32Array(INITIAL_CAPACITY);
  private payloadSizes = new Int32Array(INITIAL_CAPACITY);
  private readonly timeouts = new SparseColumn(Float64Array);
  private readonly deadlines = new SparseColumn(Float64Array);
  private readonly expiries = new SparseColumn(Float64Array);
  private readonly uniqueUntils = new SparseColumn(Float64Array);
  private readonly retrieds = new SparseColumn(Int32Array);
  private readonly attemptNumbers = new SparseColumn(Int32Array);
  private uniqueKeys: string[] | undefined;

  /** Slots in use (packed tasks, and slots a heap still holds). */
  get slotsInUse(): number {
    return this.used - this.free.length;
  }

  /** Packs `e` (which must be `packable`) into a new slot; `ordered`: a dispatch heap will hold the slot. */
  add(e: TaskIndexEntry, ordered: boolean): number {
    const slot = this.free.pop() ?? this.grow();
    const n = this.capacity;
    this.flags[slot] = ordered ? PACKED | ORDERED : PACKED;
    this.ids[slot] = e.id;
    this.seqs[slot] = e.seq;
    this.readyAts[slot] = e.readyAtMs;
    this.profileCodes[slot] = this.profiles.take(e);
    this.keyCodes[slot] = this.keys.take(e.concurrencyKey);
    this.priorities[slot] = e.priority;
    this.payloadSizes[slot] = e.payloadBytes;
    this.timeouts.set(slot, e.timeoutMs, n);
    this.deadlines.set(slot, e.deadlineAtMs, n);
    this.expiries.set(slot, e.expiresAtMs, n);
    this.uniqueUntils.set(slot, e.uniqueUntilMs, n);
    this.retrieds.set(slot, e.retried, n);
    this.attemptNumbers.set(slot, e.attemptNumber, n);
    if (this.uniqueKeys || e.uniqueKey !== "") (this.uniqueKeys ??= emptyStrings(n))[slot] = e.uniqueKey;
    return slot;
  }

  /** A new entry object with every field the slot's task had when it was packed. */
  entryAt(slot: number): TaskIndexEntry {
    const profile = this.profiles.at(this.profileCodes[slot]!);
    return indexEntry({
      id: this.ids[slot]!, type: profile.type, priority: this.priorities[slot]!, concurrencyKey: this.keys.at(this.keyCodes[slot]!),
      timeoutMs: this.timeouts.at(slot), deadlineAtMs: this.deadlines.at(slot), uniqueKey: this.uniqueKeys?.[slot] ?? "",
      maxRetry: profile.maxRetry, backoffBaseMs: profile.backoffBaseMs, backoffMaxMs: profile.backoffMaxMs, group: "", rules: [],
    }, {
      state: "pending", seq: this.seqs[slot]!, readyAtMs: this.readyAts[slot]!, expiresAtMs: this.expiries.at(slot),
      uniqueUntilMs: this.uniqueUntils.at(slot), payloadBytes: this.payloadSizes[slot]!, retried: this.retrieds.at(slot),
      attemptNumber: this.attemptNumbers.at(slot),
    });
  }

  idAt(slot: number): string {
    return this.ids[slot]!;
  }

  typeAt(slot: number): string {
    return this.profiles.at(this.profileCodes[slot]!).type;
  }

  keyAt(slot: number): string {
    return this.keys.at(this.keyCodes[slot]!);
  }

  /** Whether the slot's expiry or deadline has passed at `nowMs` (as `isOverdue` of task-exits.ts). */
  overdueAt(slot: number, nowMs: number): boolean {
    const expires = this.expiries.at(slot);
    const deadline = this.deadlines.at(slot);
    return (expires > 0 && expires <= nowMs) || (deadline > 0 && deadline <= nowMs);
  }

  priorityAt(slot: number): number {
    return this.priorities[slot]!;
  }

  seqAt(slot: number): number {
    return this.seqs[slot]!;
  }

  payloadBytesAt(slot: number): number {
    return this.payloadSizes[slot]!;
  }

  /** True while the slot's task is packed in it (not unpacked since). */
  isPacked(slot: number): boolean {
    return (this.flags[slot]! & PACKED) !== 0;
  }

  /** The task left its slot (it was unpacked); the slot stays while a heap holds it. */
  unpack(slot: number): void {
    this.clear(slot, PACKED);
  }

  /** A dispatch heap let go of the slot; it stays while its task is packed in it. */
  leaveOrder(slot: number): void {
    this.clear(slot, ORDERED);
  }

  private clear(slot: number, flag: number): void {
    const left = (this.flags[slot]! &= ~flag);
    if (left !== 0) return;
    this.profiles.release(this.profileCodes[slot]!);
    this.keys.release(this.keyCodes[slot]!);
    // Let the strings go; the numbers are overwritten by the next task.
    this.ids[slot] = undefined;
    if (this.uniqueKeys) this.uniqueKeys[slot] = "";
    this.free.push(slot);
    // A drained backlog gives its columns back (slots never move, so only an empty table can shrink).
    if (this.free.length === this.used && this.capacity > INITIAL_CAPACITY) this.reset();
  }

  private reset(): void {
    this.capacity = INITIAL_CAPACITY;
    this.used = 0;
    this.free.length = 0;
    this.ids = [];
    this.uniqueKeys = undefined;
    for (const column of this.sparse()) column.drop();
    this.resize(INITIAL_CAPACITY, false);
  }

  /**
   * A fresh slot, growing every column when they are full: doubling while small, then by
   * a quarter, so a large backlog leaves at most a quarter of its columns unused.
   */
  private grow(): number {
    if (this.used === this.capacity) {
      this.capacity = this.capacity < GENTLE_GROWTH_FROM ? this.capacity * 2 : Math.ceil(this.capacity * 1.25);
      this.resize(this.capacity, true);
    }
    return this.used++;
  }

  /** Every column at `n` slots, keeping what they hold (`keep`) or starting empty. */
  private resize(n: number, keep: boolean): void {
    const f64 = (from: Float64Array<ArrayBuffer>) => sized(from, new Float64Array(n), keep);
    const i32 = (from: Int32Array<ArrayBuffer>) => sized(from, new Int32Array(n), keep);
    this.flags = sized(this.flags, new Uint8Array(n), keep);
    this.seqs = f64(this.seqs);
    this.readyAts = f64(this.readyAts);
    this.profileCodes = i32(this.profileCodes);
    this.keyCodes = i32(this.keyCodes);
    this.priorities = i32(this.priorities);
    this.payloadSizes = i32(this.payloadSizes);
    if (keep) for (const column of this.sparse()) column.resize(n);
  }

  private sparse(): Array<SparseColumn<Float64Array<ArrayBuffer>> | SparseColumn<Int32Array<ArrayBuffer>>> {
    return [this.timeouts, this.deadlines, this.expiries, this.uniqueUntils, this.retrieds, this.attemptNumbers];
  }
}

function sized<T extends Uint8Array<ArrayBuffer> | Int32Array<ArrayBuffer> | Float64Array<ArrayBuffer>>(from: T, to: T, keep: boolean): T {
  if (keep) to.set(from);
  return to;
}

/** A column most slots leave at zero: it exists only once a slot holds something else (-0 included). */
class SparseColumn<A extends Float64Array<ArrayBuffer> | Int32Array<ArrayBuffer>> {
  private values: A | undefined;

  constructor(private readonly make: new (n: number) => A) {}

  set(slot: number, v: number, capacity: number): void {
    if (this.values) this.values[slot] = v;
    else if (!Object.is(v, 0)) (this.values = new this.make(capacity))[slot] = v;
  }

  at(slot: number): number {
    return this.values ? this.values[slot]! : 0;
  }

  resize(n: number): void {
    if (!this.values) return;
    const to = new this.make(n);
    to.set(this.values);
    this.values = to;
  }

  drop(): void {
    this.values = undefined;
  }
}

interface Profile {
  type: string;
  maxRetry: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

/** What tasks of one type nearly always share (type, retries, backoff), interned as one code. */
class Profiles {
  private readonly codes = new InternTable();
  private readonly byCode: Array<Profile | undefined> = [];
  /** The last profile taken: a backlog arrives (and loads) in long runs of one profile, which skip building the key. */
  private last = -1;

  take(e: TaskIndexEntry): number {
    const last = this.byCode[this.last];
    if (last && last.type === e.type && Object.is(last.maxRetry, e.maxRetry) && Object.is(last.backoffBaseMs, e.backoffBaseMs)
      && Object.is(last.backoffMaxMs, e.backoffMaxMs)) return this.codes.takeAgain(this.last);
    // The key tells -0 from 0, so a profile gives back exactly what it was given.
    const code = this.codes.take(`${e.type}\u0000${e.maxRetry}\u0000${num(e.backoffBaseMs)}\u0000${num(e.backoffMaxMs)}`);
    this.byCode[code] ??= { type: e.type, maxRetry: e.maxRetry, backoffBaseMs: e.backoffBaseMs, backoffMaxMs: e.backoffMaxMs };
    this.last = code;
    return code;
  }

  at(code: number): Profile {
    return this.byCode[code]!;
  }

  release(code: number): void {
    if (!this.codes.release(code)) return;
    this.byCode[code] = undefined;
    if (this.last === code) this.last = -1;
  }
}

const num = (v: number): string => (Object.is(v, -0) ? "-0" : String(v));

/** `n` empty strings in a packed array (a holey one of a million would be a slow dictionary). */
function emptyStrings(n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push("");
  return out;
}
