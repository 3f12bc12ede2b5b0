/**
 * Cooperative slicing of long request work. A request that may do a lot (a full enqueue
 * batch, a big settle, compiling a worker's rules) checks `due()` between items and
 * `await`s `yield()` when it is: other callbacks (other requests, the health check, the
 * commit) then run before it goes on. The outcome never depends on where it yielded;
 * only the longest stall it causes to others does (about WORK_SLICE_MS).
 */
import { WORK_SLICE_MS } from "../base/work-limits.js";

export class WorkSlicer {
  private startedAt = performance.now();

  constructor(private readonly sliceMs = WORK_SLICE_MS) {}

  /** True once the current slice has run its time. */
  due(): boolean {
    return performance.now() - this.startedAt >= this.sliceMs;
  }

  /** Lets the event loop run everything that is ready, then starts a new slice. */
  async yield(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.startedAt = performance.now();
  }
}

/** Items in consecutive chunks of at most `size`. */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
