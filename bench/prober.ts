/**
 * Calls an async probe back to back, `intervalMs` apart, and records how long each call
 * took: while the node's event loop is blocked, a probe's answer waits, so the slowest
 * probe bounds the longest block as a client sees it.
 */
import { sleep, wallNow } from "./time.js";

export class Prober {
  readonly latenciesMs: number[] = [];
  private running = true;
  private readonly loop: Promise<void>;

  constructor(probe: () => Promise<unknown>, intervalMs: number) {
    this.loop = (async () => {
      while (this.running) {
        const t0 = wallNow();
        await probe();
        this.latenciesMs.push(wallNow() - t0);
        await sleep(intervalMs);
      }
    })();
  }

  /** Stops after the call in flight; rejects if a probe failed. */
  async stop(): Promise<number[]> {
    this.running = false;
    await this.loop;
    return this.latenciesMs;
  }
}
