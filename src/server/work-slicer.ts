/**
 * Cooperative slicing of long request work. A request that may do a lot (a full enqueue
 * batch, a big settle, compiling a worker's rules) checks `due()` between items and
 * `await`s `yield()` when it is: other callbacks (other requests, the health check, the
 * commit) then run before it goes on. The outcome never depends on where it yielded;
 * only the longest stall it causes to others does (about WORK_SLICE_MS).
 */
import { WORK_SLICE_BYTES, WORK_SLICE_MS } from "../base/limits.js";

export class WorkSlicer {
  private startedAt = performance.now();
  private bytes = 0;

  constructor(
    private readonly sliceMs = WORK_SLICE_MS,
    private readonly sliceBytes = WORK_SLICE_BYTES,
  ) {}

  /** Counts row bytes written in this slice (its commit writes them). */
  wrote(bytes: number): void {
    this.bytes += bytes;
  }

  /** True once the current slice has run its time or written its bytes. */
  due(): boolean {
    return this.bytes >= this.sliceBytes || performance.now() - this.startedAt >= this.sliceMs;
  }

  /**
   * Lets the event loop run everything that is ready (the group commit too), then starts
   * a new slice. What a slice wrote is acknowledged by its writer's own promise (a
   * QueueRef call resolves after its commit), not here.
   */
  async yield(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.startedAt = performance.now();
    this.bytes = 0;
  }
}

/**
 * Items in consecutive chunks of at most `count` items and, past the first item of a
 * chunk, at most `maxBytes` by `bytesOf`.
 */
export function chunksBy<T>(items: readonly T[], count: number, maxBytes: number, bytesOf: (item: T) => number): T[][] {
  const out: T[][] = [];
  let chunk: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = bytesOf(item);
    if (chunk.length > 0 && (chunk.length >= count || bytes + size > maxBytes)) {
      out.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(item);
    bytes += size;
  }
  if (chunk.length > 0) out.push(chunk);
  return out;
}

/** Items in consecutive chunks of at most `size`. */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
