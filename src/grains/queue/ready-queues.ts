/**
 * The dispatch order of a queue's pending work. Single tasks wait in one heap per task
 * type, because a worker leases only the types it has handlers for; fired group batches
 * wait in one heap per task type too, because only a worker with a batch handler for
 * that type may take them. A lease pops the best head among the heaps the caller can
 * take, so a worker never scans past work it cannot run, and work nobody here can run
 * stays pending without spending a retry.
 *
 * Single tasks are filed by the type `typeOf` gives for their id. Without `typeOf`
 * every single task shares one heap and a `types` restriction cannot apply (any caller
 * takes any single task, as before types were declared).
 */
import { Heap } from "./heap.js";
import { readyOrder, type ReadyItem } from "./key-slots.js";

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
}

type Best = { heap: Heap<ReadyItem>; batchType: string | undefined; taskType: string | undefined };

export class ReadyQueues {
  /** Single tasks by type ("" holds all of them when `typeOf` is not given). */
  private readonly tasks = new Map<string, Heap<ReadyItem>>();
  private readonly batches = new Map<string, Heap<ReadyItem>>();

  constructor(private readonly typeOf?: (taskId: string) => string | undefined) {}

  pushTask(item: ReadyItem): void {
    push(this.tasks, this.typeOf?.(item.id) ?? "", item);
  }

  pushBatch(type: string, item: ReadyItem): void {
    push(this.batches, type, item);
  }

  /** Items waiting (including stale ones not yet cleaned). */
  get size(): number {
    let n = 0;
    for (const heap of this.tasks.values()) n += heap.size;
    for (const heap of this.batches.values()) n += heap.size;
    return n;
  }

  /** Pops the best item the caller may take. */
  pop(caps: LeaseCaps): Popped | undefined {
    const best = this.best(caps);
    if (!best) return undefined;
    const p = popped(best, best.heap.pop()!);
    this.forgetIfEmpty(p);
    return p;
  }

  /** The best item the caller may take, without removing it. */
  peek(caps: LeaseCaps): Popped | undefined {
    const best = this.best(caps);
    return best && popped(best, best.heap.peek()!);
  }

  /** Drops the head that `peek` returned (a stale entry). */
  dropHead(p: Popped): void {
    this.heapOf(p)?.pop();
    this.forgetIfEmpty(p);
  }

  private heapOf(p: Popped): Heap<ReadyItem> | undefined {
    return p.batchType === undefined ? this.tasks.get(p.taskType ?? "") : this.batches.get(p.batchType);
  }

  /** A type with nothing waiting leaves the map (types come and go; the scan stays short). */
  private forgetIfEmpty(p: Popped): void {
    if (this.heapOf(p)?.size !== 0) return;
    if (p.batchType === undefined) this.tasks.delete(p.taskType ?? "");
    else this.batches.delete(p.batchType);
  }

  private best(caps: LeaseCaps): Best | undefined {
    let best: Best | undefined;
    const consider = (heap: Heap<ReadyItem> | undefined, batchType: string | undefined, taskType: string | undefined) => {
      if (!heap || heap.size === 0) return;
      if (!best || readyOrder(heap.peek()!, best.heap.peek()!)) best = { heap, batchType, taskType };
    };
    const types = this.typeOf ? caps.types : undefined;
    if (types === undefined) {
      for (const [type, heap] of this.tasks) consider(heap, undefined, type);
    } else if (types.size < this.tasks.size) {
      for (const type of types) consider(this.tasks.get(type), undefined, type);
    } else {
      for (const [type, heap] of this.tasks) if (types.has(type)) consider(heap, undefined, type);
    }
    for (const type of caps.batchTypes) consider(this.batches.get(type), type, undefined);
    return best;
  }
}

function push(heaps: Map<string, Heap<ReadyItem>>, key: string, item: ReadyItem): void {
  let heap = heaps.get(key);
  if (!heap) heaps.set(key, (heap = new Heap(readyOrder)));
  heap.push(item);
}

function popped(best: Best, item: ReadyItem): Popped {
  return best.batchType === undefined
    ? { item, batchType: undefined, taskType: best.taskType ?? "" }
    : { item, batchType: best.batchType };
}
