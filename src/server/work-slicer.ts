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

  /**
   * `committed` resolves once every write made so far is committed (the database's group
   * commit). A sliced request's writes land in several transactions, one per slice: the
   * slicer waits for each, so that a request never answers for a slice whose commit failed.
   */
  constructor(
    private readonly committed: () => Promise<void> = () => Promise.resolve(),
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
   * Lets the event loop run everything that is ready (the commit too), then starts a new
   * slice. Resolves with the error of the commit that this slice's writes joined, or
   * undefined when it succeeded (or there was nothing to commit): the caller fails the
   * slice's items with it.
   */
  async yield(): Promise<unknown> {
    const commit = this.committed().then(() => undefined, (error: unknown) => error ?? new Error("commit failed"));
    await new Promise<void>((resolve) => setImmediate(resolve));
    const error = await commit;
    this.startedAt = performance.now();
    this.bytes = 0;
    return error;
  }

  /** The outcome of the last slice's commit (undefined: committed). */
  finish(): Promise<unknown> {
    return this.committed().then(() => undefined, (error: unknown) => error ?? new Error("commit failed"));
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
