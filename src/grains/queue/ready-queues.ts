/**
 * The dispatch order of a queue's pending work. Single tasks wait in one heap per task
 * type, because a worker leases only the types it has handlers for; fired group batches
 * wait in one heap per task type too, because only a worker with a batch handler for
 * that type may take them. A lease pops the best head among the heaps the caller can
 * take, so a worker never scans past work it cannot run, and work nobody here can run
 * stays pending without spending a retry.
 *
 * A single task waits either as a ready item (an object, in a `Heap`) or, when it is
 * packed (packed-tasks.ts), as its slot number in a `SlotHeap` of its type, ordered by
 * the slot's priority and seq columns. The two are one order: a lease compares their
 * heads as it compares any two heads, and a popped slot comes out as the ready item it
 * stands for, so callers never see the difference.
 *
 * Single tasks are filed by the type `typeOf` gives for their id. Without `typeOf`
 * every single task shares one heap and a `types` restriction cannot apply (any caller
 * takes any single task, as before types were declared).
 */
import { Heap } from "./heap.js";
import { readyOrder, type ReadyItem } from "./key-slots.js";
import type { PackedTasks } from "./packed-tasks.js";
import { SlotHeap } from "./slot-heap.js";

/** What a lease call can run. */
export interface LeaseCaps {
  /** Task types the worker has batch handlers for. */
  batchTypes: ReadonlySet<string>;
  /** Task types the worker has handlers for; undefined: any type. */
  types?: ReadonlySet<string>;
}

export const NO_BATCHES: LeaseCaps = { batchTypes: new Set() };

export interface Popped {
  item: ReadyItem;
  /** The task type of a batch; undefined for a single task. */
  batchType: string | undefined;
  /** The heap of single tasks it came from (its type; "" when types are not known). */
  taskType?: string;
  /** The single task came from its type's heap of packed slots. */
  packed?: boolean;
}

type Lane = "task" | "packed" | "batch";
interface Best { lane: Lane; key: string; priority: number; seq: number }

/** The same order as `readyOrder`, on a head's (priority, seq). */
const beats = (p: number, s: number, best: Best): boolean => (p !== best.priority ? p > best.priority : s < best.seq);

export class ReadyQueues {
  /** Single tasks by type ("" holds all of them when `typeOf` is not given). */
  private readonly tasks = new Map<string, Heap<ReadyItem>>();
  /** Packed single tasks by type: slots of `packed`. */
  private readonly packedByType = new Map<string, SlotHeap>();
  private readonly batches = new Map<string, Heap<ReadyItem>>();

  constructor(
    private readonly typeOf?: (taskId: string) => string | undefined,
    private readonly packed?: PackedTasks,
  ) {}

  pushTask(item: ReadyItem): void {
    push(this.tasks, this.typeOf?.(item.id) ?? "", item);
  }

  /** A packed task of `type` waits at its slot's (priority, seq). */
  pushPacked(type: string, slot: number): void {
    let heap = this.packedByType.get(type);
    if (!heap) {
      const packed = this.packed!;
      heap = new SlotHeap((a, b) => {
        const pa = packed.priorityAt(a);
        const pb = packed.priorityAt(b);
        return pa !== pb ? pa > pb : packed.seqAt(a) < packed.seqAt(b);
      });
      this.packedByType.set(type, heap);
    }
    heap.push(slot);
  }

  pushBatch(type: string, item: ReadyItem): void {
    push(this.batches, type, item);
  }

  /** Items waiting (including stale ones not yet cleaned). */
  get size(): number {
    let n = 0;
    for (const heap of this.tasks.values()) n += heap.size;
    for (const heap of this.packedByType.values()) n += heap.size;
    for (const heap of this.batches.values()) n += heap.size;
    return n;
  }

  /** Pops the best item the caller may take. */
  pop(caps: LeaseCaps): Popped | undefined {
    const best = this.best(caps);
    if (!best) return undefined;
    const p = this.take(best);
    this.forgetIfEmpty(best.lane, best.key);
    return p;
  }

  /** The best item the caller may take, without removing it. */
  peek(caps: LeaseCaps): Popped | undefined {
    const best = this.best(caps);
    if (!best) return undefined;
    if (best.lane === "packed") return { item: this.itemAt(this.packedByType.get(best.key)!.peek()!), batchType: undefined, taskType: best.key, packed: true };
    const item = (best.lane === "task" ? this.tasks : this.batches).get(best.key)!.peek()!;
    return best.lane === "task" ? { item, batchType: undefined, taskType: best.key } : { item, batchType: best.key };
  }

  /** Drops the head that `peek` returned (a stale entry). */
  dropHead(p: Popped): void {
    const lane: Lane = p.batchType !== undefined ? "batch" : p.packed ? "packed" : "task";
    const key = p.batchType ?? p.taskType ?? "";
    if (lane === "packed") {
      const slot = this.packedByType.get(key)?.pop();
      if (slot !== undefined) this.packed!.leaveOrder(slot);
    } else {
      (lane === "task" ? this.tasks : this.batches).get(key)?.pop();
    }
    this.forgetIfEmpty(lane, key);
  }

  /**
   * Lazy deletion's bound for the packed heaps: when one holds many times `liveCount`
   * slots, the slots `keep` rejects (their task moved on) leave it.
   */
  compactPacked(liveCount: number, keep: (slot: number) => boolean): void {
    for (const [type, heap] of this.packedByType) {
      heap.compactIfStale(liveCount, keep, (slot) => this.packed!.leaveOrder(slot));
      if (heap.size === 0) this.packedByType.delete(type);
    }
  }

  /** The ready item a slot stands for: its task's id, priority and seq as they were packed. */
  private itemAt(slot: number): ReadyItem {
    const packed = this.packed!;
    return { id: packed.idAt(slot), priority: packed.priorityAt(slot), seq: packed.seqAt(slot) };
  }

  private take(best: Best): Popped {
    switch (best.lane) {
      case "task":
        return { item: this.tasks.get(best.key)!.pop()!, batchType: undefined, taskType: best.key };
      case "packed": {
        const slot = this.packedByType.get(best.key)!.pop()!;
        const item = this.itemAt(slot);
        this.packed!.leaveOrder(slot);
        return { item, batchType: undefined, taskType: best.key, packed: true };
      }
      case "batch":
        return { item: this.batches.get(best.key)!.pop()!, batchType: best.key };
    }
  }

  /** A type with nothing waiting leaves the map (types come and go; the scan stays short). */
  private forgetIfEmpty(lane: Lane, key: string): void {
    const heaps = lane === "task" ? this.tasks : lane === "packed" ? this.packedByType : this.batches;
    if (heaps.get(key)?.size === 0) heaps.delete(key);
  }

  private best(caps: LeaseCaps): Best | undefined {
    let best: Best | undefined;
    const consider = (lane: Lane, key: string, priority: number, seq: number) => {
      if (!best || beats(priority, seq, best)) best = { lane, key, priority, seq };
    };
    const task = (type: string, heap = this.tasks.get(type)) => {
      const top = heap?.peek();
      if (top) consider("task", type, top.priority, top.seq);
    };
    const packed = (type: string, heap = this.packedByType.get(type)) => {
      const top = heap?.peek();
      if (top !== undefined) consider("packed", type, this.packed!.priorityAt(top), this.packed!.seqAt(top));
    };
    const types = this.typeOf ? caps.types : undefined;
    if (types === undefined) {
      for (const [type, heap] of this.tasks) task(type, heap);
      for (const [type, heap] of this.packedByType) packed(type, heap);
    } else if (types.size < this.tasks.size + this.packedByType.size) {
      for (const type of types) {
        task(type);
        packed(type);
      }
    } else {
      for (const [type, heap] of this.tasks) if (types.has(type)) task(type, heap);
      for (const [type, heap] of this.packedByType) if (types.has(type)) packed(type, heap);
    }
    for (const type of caps.batchTypes) {
      const top = this.batches.get(type)?.peek();
      if (top) consider("batch", type, top.priority, top.seq);
    }
    return best;
  }
}

function push(heaps: Map<string, Heap<ReadyItem>>, key: string, item: ReadyItem): void {
  let heap = heaps.get(key);
  if (!heap) heaps.set(key, (heap = new Heap(readyOrder)));
  heap.push(item);
}
