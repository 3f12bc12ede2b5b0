/**
 * Time, injected. Grains never read the wall clock or arm timers directly, so the
 * dispatch logic runs under a fake clock in tests with exact assertions and no sleeps.
 */
export interface Clock {
  /** Wall-clock time in Unix epoch milliseconds. */
  nowMs(): number;
  /** Runs `fn` after `delayMs`; returns a function that cancels it. */
  setTimer(delayMs: number, fn: () => void): () => void;
}

/** The real clock: Date.now and unref'd timers (a pending timer never keeps a process alive). */
export const systemClock: Clock = {
  nowMs: () => Date.now(),
  setTimer(delayMs, fn) {
    const handle = setTimeout(fn, Math.max(0, delayMs));
    handle.unref();
    return () => clearTimeout(handle);
  },
};
