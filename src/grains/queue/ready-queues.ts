/**
 * The dispatch order of a queue's pending work. Single tasks wait in one heap; fired
 * group batches wait in one heap per task type, because only a worker with a batch
 * handler for that type may take them. A lease pops the best head among the heaps the
 * caller can take, so a plain worker never scans past batches it cannot run.
 */
import { Heap } from "./heap.js";
import { readyOrder, type ReadyItem } from "./key-slots.js";

/** What a lease call can run. */
export interface LeaseCaps {
  /** Task types the worker has batch handlers for. */
  batchTypes: ReadonlySet<string>;
}

export const NO_BATCHES: LeaseCaps = { batchTypes: new Set() };

export interface Popped {
  item: ReadyItem;
  /** The task type of a batch; undefined for a single task. */
  batchType: string | undefined;
}

export class ReadyQueues {
  private readonly tasks = new Heap<ReadyItem>(readyOrder);
  private readonly batches = new Map<string, Heap<ReadyItem>>();

  pushTask(item: ReadyItem): void {
    this.tasks.push(item);
  }

  pushBatch(type: string, item: ReadyItem): void {
    let heap = this.batches.get(type);
    if (!heap) this.batches.set(type, (heap = new Heap(readyOrder)));
    heap.push(item);
  }

  /** Items waiting (including stale ones not yet cleaned). */
  get size(): number {
    let n = this.tasks.size;
    for (const heap of this.batches.values()) n += heap.size;
    return n;
  }

  /** Pops the best item the caller may take. */
  pop(caps: LeaseCaps): Popped | undefined {
    const best = this.best(caps);
    if (!best) return undefined;
    return { item: best.heap.pop()!, batchType: best.batchType };
  }

  /** The best item the caller may take, without removing it. */
  peek(caps: LeaseCaps): Popped | undefined {
    const best = this.best(caps);
    return best && { item: best.heap.peek()!, batchType: best.batchType };
  }

  /** Drops the head that `peek` returned (a stale entry). */
  dropHead(popped: Popped): void {
    (popped.batchType === undefined ? this.tasks : this.batches.get(popped.batchType))?.pop();
  }

  private best(caps: LeaseCaps): { heap: Heap<ReadyItem>; batchType: string | undefined } | undefined {
    let best: { heap: Heap<ReadyItem>; batchType: string | undefined } | undefined =
      this.tasks.size > 0 ? { heap: this.tasks, batchType: undefined } : undefined;
    for (const type of caps.batchTypes) {
      const heap = this.batches.get(type);
      if (!heap || heap.size === 0) continue;
      if (!best || readyOrder(heap.peek()!, best.heap.peek()!)) best = { heap, batchType: type };
    }
    return best;
  }
}
