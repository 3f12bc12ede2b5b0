/**
 * Clocks for the benchmark. `wallNow()` is epoch milliseconds with sub-millisecond
 * resolution (performance.timeOrigin + performance.now()), so timestamps taken in the
 * parent and in a worker process on the same machine can be subtracted.
 */
import { performance } from "node:perf_hooks";

export const wallNow = (): number => performance.timeOrigin + performance.now();

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` every `intervalMs` until it returns a value other than undefined. */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number, intervalMs = 5): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `; last error: ${String(lastError)}` : ""}`);
    }
    await sleep(intervalMs);
  }
}

/**
 * CLOCK_MONOTONIC in µs: the clock of V8 CPU profiles (--cpu-prof sample timestamps), in
 * every process of the machine. Scenarios keep their measured window in it, so that a
 * profile can be cut to the measurement.
 */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);
