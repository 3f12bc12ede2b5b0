/**
 * Unique keys held by unfinished tasks: while a task holds its key (until it finishes,
 * or its unique TTL passes), no other task of the queue may be admitted or revived with it.
 *
 * Why a part of its own: a key is taken at admission, revival and load, and given back
 * by the one unlink path; each of them must agree on who holds it.
 *
 * Invariant: a key is held only by a task still in memory and not past its TTL; stale
 * holds are dropped lazily, when someone asks.
 */
export class UniqueKeys {
  private readonly holders = new Map<string, { taskId: string; untilMs: number }>();

  /** @param isUnfinished whether a task id is still in memory */
  constructor(private readonly isUnfinished: (taskId: string) => boolean) {}

  /** The task that holds `key` at `nowMs`, if any. */
  holderOf(key: string, nowMs: number): string | undefined {
    const held = this.holders.get(key);
    if (!held) return undefined;
    if ((held.untilMs !== 0 && held.untilMs <= nowMs) || !this.isUnfinished(held.taskId)) {
      this.holders.delete(key);
      return undefined;
    }
    return held.taskId;
  }

  /** `taskId` holds `key` until `untilMs` (0 = until it finishes). */
  hold(key: string, taskId: string, untilMs: number): void {
    this.holders.set(key, { taskId, untilMs });
  }

  /** `taskId` left memory: its key is free, unless another task holds it since. */
  release(key: string, taskId: string): void {
    if (this.holders.get(key)?.taskId === taskId) this.holders.delete(key);
  }
}
