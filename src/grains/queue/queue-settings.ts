/**
 * The operator's dials on one queue: paused, the per-key limit and the rate limit (the
 * token bucket). The lease loop reads them as gates; operators change them live.
 *
 * Why a part of its own: each setting is written here and nowhere else, with the effect
 * that persists it in the same turn (one writer per setting), and a change that may let
 * waiting work run tells the shell to wake parked leases.
 *
 * Invariant: `bucket` is the override, else the server default, else absent (unlimited);
 * a replaced bucket starts full.
 */
import type { CoreMemory } from "./core-memory.js";
import type { RuleMembership } from "./rule-membership.js";
import { TokenBucket, type RateLimitSpec } from "./token-bucket.js";

export class QueueSettings {
  private pausedFlag = false;
  private bucket: TokenBucket | undefined;

  constructor(
    private readonly memory: CoreMemory,
    private readonly rules: RuleMembership,
  ) {}

  get paused(): boolean {
    return this.pausedFlag;
  }

  get keyLimit(): number | undefined {
    return this.rules.slots.limit;
  }

  get rateLimit(): RateLimitSpec | undefined {
    return this.bucket?.spec;
  }

  /** Restores the durable settings at load (no effects: they are already stored). */
  restore(paused: boolean, keyLimit: number | undefined, rateLimit: RateLimitSpec | undefined, nowMs: number): void {
    this.pausedFlag = paused;
    this.rules.setKeyLimit(keyLimit);
    this.useRateLimit(rateLimit, nowMs);
  }

  setPaused(paused: boolean, nowMs: number): void {
    if (this.pausedFlag === paused) return;
    this.pausedFlag = paused;
    this.memory.persist({ kind: "setPaused", paused, atMs: nowMs });
    if (!paused) this.memory.markReadyChanged();
  }

  /** Changes the per-key limit live; lowering it keeps running tasks. */
  setKeyLimit(limit: number | undefined, nowMs: number): void {
    this.rules.setKeyLimit(limit);
    this.memory.persist({ kind: "setKeyLimit", limit, atMs: nowMs });
  }

  /** Changes the rate limit live (undefined: back to the server default). */
  setRateLimit(spec: RateLimitSpec | undefined, nowMs: number): void {
    this.useRateLimit(spec, nowMs);
    this.memory.persist({ kind: "setRateLimit", spec, atMs: nowMs });
  }

  /** The rate-limit gate: takes a token, true when there was one (or no limit). */
  takeToken(nowMs: number): boolean {
    return !this.bucket || this.bucket.take(nowMs);
  }

  /** True when a lease could pass the rate-limit gate now. */
  hasToken(nowMs: number): boolean {
    return !this.bucket || this.bucket.hasToken(nowMs);
  }

  /** When the next token arrives; undefined when there is no limit. */
  nextTokenAtMs(): number | undefined {
    return this.bucket?.nextTokenAtMs();
  }

  /** True when a rate limit applies. */
  get limited(): boolean {
    return this.bucket !== undefined;
  }

  private useRateLimit(spec: RateLimitSpec | undefined, nowMs: number): void {
    const effective = spec ?? this.memory.config.defaultRateLimit;
    this.bucket = effective ? new TokenBucket(effective, nowMs) : undefined;
    this.memory.markReadyChanged();
  }
}
