/**
 * A token bucket (the per-queue rate limit): holds up to `burst` tokens and refills
 * at `ratePerSec`. Pure: time is passed in.
 */
export interface RateLimitSpec {
  ratePerSec: number;
  burst: number;
}

export class TokenBucket {
  private tokens: number;
  private refilledAtMs: number;

  constructor(readonly spec: RateLimitSpec, nowMs: number) {
    this.tokens = spec.burst;
    this.refilledAtMs = nowMs;
  }

  /** Takes one token if there is one. */
  take(nowMs: number): boolean {
    this.refill(nowMs);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  hasToken(nowMs: number): boolean {
    this.refill(nowMs);
    return this.tokens >= 1;
  }

  /**
   * When the next token arrives; undefined while one is there now. Rate-limited work
   * waiting with a token in the bucket is dispatchable already (the next Lease call takes
   * it), so there is no instant to wake the grain at: returning "now" made a grain with
   * waiting work nobody leased re-arm its timer at the same instant after every tick.
   */
  nextTokenAtMs(): number | undefined {
    if (this.tokens >= 1) return undefined;
    return this.refilledAtMs + Math.ceil(((1 - this.tokens) / this.spec.ratePerSec) * 1000);
  }

  private refill(nowMs: number): void {
    if (nowMs <= this.refilledAtMs) return;
    this.tokens = Math.min(this.spec.burst, this.tokens + ((nowMs - this.refilledAtMs) / 1000) * this.spec.ratePerSec);
    this.refilledAtMs = nowMs;
  }
}
