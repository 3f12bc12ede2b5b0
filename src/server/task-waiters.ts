/**
 * Callers waiting for tasks to end (WaitTask). A waiter parks until the grain reports
 * that its task finished or was deleted (the `onTasksEnded` hook, told after the commit),
 * until its timeout, or until its caller goes away; nothing polls. The number parked is
 * bounded (a waiter costs a timer and an open call): beyond it a call is refused at once.
 */
import type { Clock } from "../base/clock.js";
import { ConveyorError } from "../base/errors.js";

/** Why a wait ended. */
export type WaitEnd = "ended" | "timeout" | "cancelled";

interface Waiter {
  end: (why: WaitEnd) => void;
}

export class TaskWaiters {
  private readonly byTask = new Map<string, Set<Waiter>>();
  private count = 0;

  constructor(private readonly options: { clock: Pick<Clock, "setTimer">; max: number }) {}

  /** Waiters parked now. */
  get size(): number {
    return this.count;
  }

  /**
   * Parks until task `id` ends, `timeoutMs` passes or `signal` aborts. Register before
   * reading the task, so an end between the read and the park is not missed.
   * Throws WAITERS_FULL when the node holds its maximum of waiters.
   */
  wait(id: string, timeoutMs: number, signal?: AbortSignal): { ended: Promise<WaitEnd>; cancel: () => void } {
    if (this.count >= this.options.max) {
      throw new ConveyorError("RESOURCE_EXHAUSTED", "WAITERS_FULL",
        `the node holds ${this.options.max} waiting WaitTask calls, its maximum; retry later`);
    }
    let waiter!: Waiter;
    const ended = new Promise<WaitEnd>((resolve) => {
      const cancelTimer = this.options.clock.setTimer(timeoutMs, () => waiter.end("timeout"));
      const onAbort = () => waiter.end("cancelled");
      waiter = {
        end: (why) => {
          const set = this.byTask.get(id);
          if (!set?.delete(waiter)) return;
          if (set.size === 0) this.byTask.delete(id);
          this.count -= 1;
          cancelTimer();
          signal?.removeEventListener("abort", onAbort);
          resolve(why);
        },
      };
      let set = this.byTask.get(id);
      if (!set) this.byTask.set(id, (set = new Set()));
      set.add(waiter);
      this.count += 1;
      signal?.addEventListener("abort", onAbort, { once: true });
      if (signal?.aborted) onAbort();
    });
    return { ended, cancel: () => waiter.end("cancelled") };
  }

  /** Tasks ended (committed): wakes their waiters. */
  notify(ids: readonly string[]): void {
    for (const id of ids) {
      const set = this.byTask.get(id);
      if (set) for (const w of [...set]) w.end("ended");
    }
  }

  /** The node is stopping: every waiter answers now with the task as it is. */
  releaseAll(): void {
    for (const set of [...this.byTask.values()]) for (const w of [...set]) w.end("cancelled");
  }
}
