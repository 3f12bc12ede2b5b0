/**
 * A worker's one budget of `concurrency` slots, shared by its lease loops (one per node
 * it polls). A Lease call may be answered with as many deliveries as it asked for, so a
 * loop reserves the slots it asks for before calling and gives back what the answer did
 * not fill: running deliveries plus reserved slots never exceed the concurrency, however
 * many loops are parked at once.
 *
 * Loops waiting for a slot are served first come, first served, so that with fewer
 * slots than nodes a loop whose node keeps answering cannot starve the others.
 */

interface Waiter {
  wake: () => void;
}

export class SlotBudget {
  private reserved = 0;
  private readonly waiting: Waiter[] = [];

  /** `running()`: deliveries being handled now (each holds one slot). */
  constructor(readonly total: number, private readonly running: () => number) {}

  get free(): number {
    return this.total - this.running() - this.reserved;
  }

  /**
   * Waits for a free slot (behind loops already waiting), then reserves `share(free)`
   * of the free slots (at least one). Resolves 0 when `signal` aborts first.
   */
  async reserve(share: (free: number) => number, signal: AbortSignal): Promise<number> {
    let me: Waiter | undefined;
    try {
      while (!signal.aborted) {
        const free = this.free;
        if (free > 0 && (this.waiting.length === 0 || this.waiting[0] === me)) {
          if (me) this.waiting.shift();
          me = undefined;
          const slots = Math.min(free, Math.max(1, share(free)));
          this.reserved += slots;
          this.wakeNext();
          return slots;
        }
        const waiter: Waiter = me ?? { wake: () => {} };
        if (!me) this.waiting.push((me = waiter));
        await new Promise<void>((resolve) => {
          const done = () => {
            signal.removeEventListener("abort", done);
            resolve();
          };
          waiter.wake = done;
          signal.addEventListener("abort", done, { once: true });
        });
      }
      return 0;
    } finally {
      if (me) {
        this.waiting.splice(this.waiting.indexOf(me), 1);
        this.wakeNext();
      }
    }
  }

  /** Reserves up to `max` free slots now, unless none is free or loops wait ahead: how many it reserved. */
  tryReserve(max: number): number {
    if (this.waiting.length > 0) return 0;
    const slots = Math.max(0, Math.min(this.free, max));
    this.reserved += slots;
    return slots;
  }

  /** A Lease answer came: its deliveries run (they count in `running`), the unused reservation is free again. */
  release(slots: number): void {
    this.reserved -= slots;
    this.wakeNext();
  }

  /** A running delivery ended (or was abandoned): its slot is free. */
  freed(): void {
    this.wakeNext();
  }

  private wakeNext(): void {
    if (this.free > 0) this.waiting[0]?.wake();
  }
}

/**
 * How many of `free` slots a loop asks for. One loop (a single node, or every queue on
 * one owner) asks for all of them, as a worker always did. With several, a loop whose
 * last answer was empty parks with one slot (enough to be woken by the next task on its
 * node; it asks for more as soon as that answer comes), and a busy one takes an equal
 * share with the loops not parked now, so slots follow the work instead of sitting in
 * idle long polls.
 */
export function leaseShare(free: number, loops: number, notParked: number, lastAnswerEmpty: boolean): number {
  if (loops <= 1) return free;
  if (lastAnswerEmpty) return 1;
  return Math.ceil(free / Math.max(1, notParked));
}
