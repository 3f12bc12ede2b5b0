import type { Random } from "../../base/random.js";

/**
 * Delay before retry number `retried` (1 for the first retry): exponential from
 * `baseMs`, capped at `maxMs`, with "equal jitter" (half fixed, half random) so that
 * a burst of failures does not come back as a burst.
 */
export function retryDelayMs(retried: number, baseMs: number, maxMs: number, random: Random): number {
  const exponent = Math.min(Math.max(retried - 1, 0), 40);
  const capped = Math.min(maxMs, baseMs * 2 ** exponent);
  return Math.round(capped / 2 + random.next() * (capped / 2));
}
