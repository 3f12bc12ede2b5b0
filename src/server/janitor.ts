/**
 * The retention janitor: deletes finished tasks whose retention is over.
 *
 * Every `intervalMs` it drains everything due, in chunks. Each chunk is one short write
 * (it joins the group commit like any other), and between chunks it waits for that commit
 * and then yields a macrotask, so RPCs, lease wake-ups and health checks run between
 * chunks: the longest the event loop is held is one chunk, however large the backlog.
 * Draining back to back (rather than one chunk per interval, as before) is what lets
 * deletion keep up with completions at a sustained peak: one 5,000-row chunk per 10 s
 * interval deleted 500 tasks/s, less than a busy node finishes.
 *
 * A chunk's size follows its measured time (delete + commit) towards
 * JANITOR_CHUNK_TARGET_MS: a deleted row costs its random index pages (id, attempts) and
 * their share of the WAL, 20-70 µs depending on the machine and its load, so no fixed row
 * count keeps the block short everywhere.
 */
import { performance } from "node:perf_hooks";
import { setImmediate as nextMacrotask } from "node:timers/promises";
import type { Logger } from "pino";
import type { Clock } from "../base/clock.js";

/** How long one chunk (delete + commit) should hold the event loop: about a pickup's p99 budget. */
export const JANITOR_CHUNK_TARGET_MS = 5;
/** Bounds of a chunk, in rows: the first chunk's size is the minimum. */
export const JANITOR_CHUNK_MIN_ROWS = 32;
export const JANITOR_CHUNK_MAX_ROWS = 2_000;

export interface JanitorDeps {
  /** Deletes up to `limit` finished tasks due at `nowMs`; returns how many it deleted. */
  purge(nowMs: number, limit: number): number;
  /** Resolves once the writes made so far are committed. */
  committed(): Promise<void>;
  clock: Clock;
  intervalMs: number;
  logger: Logger;
}

export class Janitor {
  private cancelTimer = (): void => {};
  private stopped = true;
  private running: Promise<number> = Promise.resolve(0);
  /** The next chunk's size, adapted run after run. */
  private chunkRows = JANITOR_CHUNK_MIN_ROWS;

  constructor(private readonly deps: JanitorDeps) {}

  start(): void {
    this.stopped = false;
    this.arm();
  }

  /** No chunk starts after this (one in progress is synchronous: it has already ended). */
  stop(): void {
    this.stopped = true;
    this.cancelTimer();
  }

  /** The run in progress (or the last one): how many tasks it deleted. For tests. */
  settled(): Promise<number> {
    return this.running;
  }

  /** Deletes every task due now, chunk by chunk; resolves with how many it deleted. */
  async drain(): Promise<number> {
    let total = 0;
    while (!this.stopped) {
      const limit = this.chunkRows;
      const startedAt = performance.now();
      const deleted = this.deps.purge(this.deps.clock.nowMs(), limit);
      total += deleted;
      await this.deps.committed();
      if (deleted < limit) break;
      this.resize(performance.now() - startedAt);
      await nextMacrotask();
    }
    return total;
  }

  /** Scales the chunk towards the target time, at most doubling or halving it at once (one slow commit is noise). */
  private resize(elapsedMs: number): void {
    const factor = Math.min(2, Math.max(0.5, JANITOR_CHUNK_TARGET_MS / Math.max(elapsedMs, 0.01)));
    this.chunkRows = Math.round(Math.min(JANITOR_CHUNK_MAX_ROWS, Math.max(JANITOR_CHUNK_MIN_ROWS, this.chunkRows * factor)));
  }

  private arm(): void {
    if (this.stopped) return;
    this.cancelTimer = this.deps.clock.setTimer(this.deps.intervalMs, () => {
      this.running = this.drain().then((purged) => {
        if (purged > 0) this.deps.logger.debug({ purged }, "purged finished tasks past retention");
        return purged;
      }, (err: unknown) => {
        this.deps.logger.error({ err }, "retention purge failed");
        return 0;
      }).finally(() => this.arm());
    });
  }
}
