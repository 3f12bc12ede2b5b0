/**
 * A Clock for in-process tests of the grain runtime: time moves only when the test
 * advances it, and advancing fires every timer that came due, in due order (timers armed
 * by a firing timer fire too if they fall within the advance). No test waits on real time.
 */
import type { Clock } from "../../src/base/clock.js";

interface Timer {
  atMs: number;
  order: number;
  fn: () => void;
}

export class FakeClock implements Clock {
  private timers: Timer[] = [];
  private armed = 0;

  constructor(private now = 1_700_000_000_000) {}

  nowMs(): number {
    return this.now;
  }

  setTimer(delayMs: number, fn: () => void): () => void {
    const timer: Timer = { atMs: this.now + Math.max(0, delayMs), order: this.armed++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Moves time forward by `ms`, firing each timer due by then at its own instant. */
  advance(ms: number): void {
    const until = this.now + ms;
    for (;;) {
      const next = this.timers
        .filter((t) => t.atMs <= until)
        .sort((a, b) => a.atMs - b.atMs || a.order - b.order)[0];
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.now = Math.max(this.now, next.atMs);
      next.fn();
    }
    this.now = until;
  }

  /** Timers armed and not yet fired or cancelled. */
  get pendingTimers(): number {
    return this.timers.length;
  }
}
