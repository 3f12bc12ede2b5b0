/**
 * Time, injected. Grains never read the wall clock or arm timers directly, so the
 * dispatch logic runs under a fake clock in tests with exact assertions and no sleeps.
 */
import { setLongTimeout } from "./long-timer.js";

export interface Clock {
  /** Wall-clock time in Unix epoch milliseconds. */
  nowMs(): number;
  /** Runs `fn` after `delayMs` (any length: see long-timer.ts); returns a function that cancels it. */
  setTimer(delayMs: number, fn: () => void): () => void;
}

/**
 * The real clock: Date.now and unref'd timers (a pending timer never keeps a process
 * alive). Delays beyond Node's setTimeout limit (~24.8 days) are armed in steps.
 */
export const systemClock: Clock = {
  nowMs: () => Date.now(),
  setTimer: (delayMs, fn) => setLongTimeout(fn, delayMs, { unref: true }),
};
