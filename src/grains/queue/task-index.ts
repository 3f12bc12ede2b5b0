/**
 * The index of a queue's unfinished tasks: task id → its entry. Most entries are objects
 * (TaskIndexEntry); a plain pending task may instead be packed into columns
 * (packed-tasks.ts), and the index then maps its id to the slot number.
 *
 * Why one Map for both: its iteration order is arrival order, which bulk actions and the
 * snapshot rely on, and replacing an id's value keeps its place. So packing and
 * unpacking change how a task is stored, never where it stands.
 *
 * Invariant: the index holds exactly the unfinished tasks. `get` hands out the live
 * entry object, unpacking a packed task first, so a part that mutates an entry always
 * mutates the task; the read-only lookups (`view`, `stateOf`, `isPendingAt`, ...) never
 * unpack.
 */
import { packable, type PackedTasks } from "./packed-tasks.js";
import type { TaskIndexEntry, TaskState } from "./task.js";

export class TaskIndex {
  private readonly byId = new Map<string, TaskIndexEntry | number>();

  constructor(private readonly packed: PackedTasks) {}

  get size(): number {
    return this.byId.size;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** The live entry of `id`; a packed task is unpacked into an object first (in place). */
  get(id: string): TaskIndexEntry | undefined {
    const v = this.byId.get(id);
    if (typeof v !== "number") return v;
    const e = this.packed.entryAt(v);
    this.byId.set(id, e);
    this.packed.unpack(v);
    return e;
  }

  /** A read-only look at `id`: its entry, or a copy of a packed one (left packed). */
  view(id: string): TaskIndexEntry | undefined {
    const v = this.byId.get(id);
    return typeof v === "number" ? this.packed.entryAt(v) : v;
  }

  /** Adds a new unfinished task (admission, revival, load). */
  set(e: TaskIndexEntry): void {
    this.byId.set(e.id, e);
  }

  /** The task finished or was deleted (its entry was fetched with `get`, so it is not packed). */
  delete(id: string): void {
    const v = this.byId.get(id);
    if (typeof v === "number") this.packed.unpack(v);
    this.byId.delete(id);
  }

  stateOf(id: string): TaskState | undefined {
    const v = this.byId.get(id);
    return typeof v === "number" ? "pending" : v?.state;
  }

  typeOf(id: string): string | undefined {
    const v = this.byId.get(id);
    return typeof v === "number" ? this.packed.typeAt(v) : v?.type;
  }

  payloadBytesOf(id: string): number | undefined {
    const v = this.byId.get(id);
    return typeof v === "number" ? this.packed.payloadBytesAt(v) : v?.payloadBytes;
  }

  /** True when `id` is pending at dispatch rank `seq` (what a ready or held item checks). */
  isPendingAt(id: string, seq: number): boolean {
    const v = this.byId.get(id);
    if (v === undefined) return false;
    return typeof v === "number" ? this.packed.seqAt(v) === seq : v.state === "pending" && v.seq === seq;
  }

  /**
   * The concurrency key of a task packed at rank `seq` that is not overdue at `nowMs`
   * (what the dispatch rule needs to hold it without unpacking it); undefined for any
   * other task, and for a packed task without a key.
   */
  packedKeyOf(id: string, seq: number, nowMs: number): string | undefined {
    const v = this.byId.get(id);
    if (typeof v !== "number" || this.packed.seqAt(v) !== seq || this.packed.overdueAt(v, nowMs)) return undefined;
    const key = this.packed.keyAt(v);
    return key === "" ? undefined : key;
  }

  /**
   * Packs the live entry `e` when it is `packable`: returns its slot, or undefined (it
   * stays an object). After packing, `e` is a detached copy: read it if need be, never
   * change it (the next `get` hands out a new object).
   */
  pack(e: TaskIndexEntry, ordered: boolean): number | undefined {
    if (!packable(e) || this.byId.get(e.id) !== e) return undefined;
    const slot = this.packed.add(e, ordered);
    this.byId.set(e.id, slot);
    return slot;
  }

  /**
   * Adds a new task straight into the columns when `e` is `packable` (a loaded row, whose
   * id the index does not hold yet; nothing of `e` itself is kept); its slot, or undefined.
   */
  packNew(e: TaskIndexEntry): number | undefined {
    if (!packable(e)) return undefined;
    const slot = this.packed.add(e, true);
    this.byId.set(e.id, slot);
    return slot;
  }

  /** The entries that are objects (packed tasks are pending and have no rules, group or lease). */
  objects(): IterableIterator<TaskIndexEntry> {
    return objectsOf(this.byId.values());
  }

  /** Ids of the tasks in `state`, in arrival order. */
  idsInState(state: TaskState): string[] {
    const ids: string[] = [];
    for (const [id, v] of this.byId) if ((typeof v === "number" ? "pending" : v.state) === state) ids.push(id);
    return ids;
  }

  /** Copies of every entry, packed ones included, in arrival order. */
  snapshot(): TaskIndexEntry[] {
    return [...this.byId.values()].map((v) => (typeof v === "number" ? this.packed.entryAt(v) : { ...v }));
  }

  /** Ids of the packed tasks, in arrival order (for tests). */
  packedIds(): string[] {
    const ids: string[] = [];
    for (const [id, v] of this.byId) if (typeof v === "number") ids.push(id);
    return ids;
  }
}

function* objectsOf(values: IterableIterator<TaskIndexEntry | number>): IterableIterator<TaskIndexEntry> {
  for (const v of values) if (typeof v !== "number") yield v;
}
