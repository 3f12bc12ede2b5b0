/**
 * A timer of any length. Node's setTimeout takes at most 2^31-1 ms (about 24.8 days):
 * a longer delay becomes 1 ms (with a TimeoutOverflowWarning), so a far-future timer
 * fires at once and, when its owner re-arms it for the same instant, spins forever.
 * `setLongTimeout` arms steps of at most that limit and re-arms until the full delay has
 * passed, so the callback runs once, at the real instant.
 *
 * Every timer in src/ whose delay can come from a caller, a task or the config goes
 * through here (the server through `systemClock.setTimer`, the SDK directly).
 */

/** The longest delay Node's setTimeout honours. */
export const MAX_TIMER_STEP_MS = 2 ** 31 - 1;

export interface LongTimeoutOptions {
  /** Do not keep the process alive for this timer. */
  unref?: boolean;
}

/**
 * Runs `fn` once after `delayMs` (negative or NaN: as soon as possible; Infinity: never);
 * returns a function that cancels it, whichever step is armed.
 */
export function setLongTimeout(fn: () => void, delayMs: number, options: LongTimeoutOptions = {}): () => void {
  if (delayMs === Infinity) return () => {};
  let remainingMs = Number.isNaN(delayMs) ? 0 : Math.max(0, delayMs);
  let handle: ReturnType<typeof setTimeout> | undefined;
  let cancelled = false;
  const arm = () => {
    const stepMs = Math.min(remainingMs, MAX_TIMER_STEP_MS);
    remainingMs -= stepMs;
    handle = setTimeout(() => {
      handle = undefined;
      if (cancelled) return;
      if (remainingMs > 0) arm();
      else fn();
    }, stepMs);
    if (options.unref) handle.unref();
  };
  arm();
  return () => {
    cancelled = true;
    if (handle !== undefined) clearTimeout(handle);
    handle = undefined;
  };
}
