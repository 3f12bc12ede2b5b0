/**
 * Timers of any length (issue 9, finding 4): Node turns a setTimeout delay above 2^31-1 ms
 * into 1 ms. vitest's fake timers do the same, so these tests fail for a plain setTimeout.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { systemClock } from "../../src/base/clock.js";
import { MAX_TIMER_STEP_MS, setLongTimeout } from "../../src/base/long-timer.js";

const DAY_MS = 86_400_000;

describe("setLongTimeout", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("the fake timers overflow like Node's (so the tests below can fail)", () => {
    let fired = 0;
    setTimeout(() => (fired += 1), 30 * DAY_MS);
    vi.advanceTimersByTime(1);
    expect(fired).toBe(1);
  });

  it("a 30-day timer does not fire at 24.8 days nor spin, and fires once at 30 days", () => {
    const arm = vi.spyOn(globalThis, "setTimeout");
    let fired = 0;
    setLongTimeout(() => (fired += 1), 30 * DAY_MS);
    vi.advanceTimersByTime(1);
    expect(fired).toBe(0);
    vi.advanceTimersByTime(MAX_TIMER_STEP_MS + 1_000);
    expect(fired).toBe(0);
    vi.advanceTimersByTime(30 * DAY_MS - MAX_TIMER_STEP_MS - 1_002);
    expect(fired, "1 ms before 30 days").toBe(0);
    vi.advanceTimersByTime(1);
    expect(fired, "at 30 days").toBe(1);
    vi.advanceTimersByTime(60 * DAY_MS);
    expect(fired).toBe(1);
    // Two steps in all: the longest one Node honours, then the rest.
    expect(arm).toHaveBeenCalledTimes(2);
    expect(vi.getTimerCount()).toBe(0);
    arm.mockRestore();
  });

  it("fires at the exact instant after several steps", () => {
    let firedAt: number | undefined;
    const start = Date.now();
    const delay = 3 * MAX_TIMER_STEP_MS + 5;
    setLongTimeout(() => (firedAt = Date.now()), delay);
    vi.advanceTimersByTime(delay - 1);
    expect(firedAt).toBeUndefined();
    vi.advanceTimersByTime(1);
    expect(firedAt).toBe(start + delay);
  });

  it("cancel works before and after a re-arm", () => {
    let fired = 0;
    const early = setLongTimeout(() => (fired += 1), 30 * DAY_MS);
    const late = setLongTimeout(() => (fired += 1), 30 * DAY_MS);
    early();
    vi.advanceTimersByTime(MAX_TIMER_STEP_MS + 1); // `late` has re-armed its second step
    expect(vi.getTimerCount()).toBe(1);
    late();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(60 * DAY_MS);
    expect(fired).toBe(0);
  });

  it("short, zero, negative and NaN delays behave like setTimeout; Infinity never fires", () => {
    const fired: string[] = [];
    setLongTimeout(() => fired.push("500"), 500);
    setLongTimeout(() => fired.push("zero"), 0);
    setLongTimeout(() => fired.push("negative"), -10);
    setLongTimeout(() => fired.push("nan"), Number.NaN);
    setLongTimeout(() => fired.push("infinity"), Infinity);
    setLongTimeout(() => fired.push("max"), MAX_TIMER_STEP_MS);
    vi.advanceTimersByTime(0);
    expect(fired).toEqual(["zero", "negative", "nan"]);
    vi.advanceTimersByTime(500);
    expect(fired).toEqual(["zero", "negative", "nan", "500"]);
    vi.advanceTimersByTime(MAX_TIMER_STEP_MS);
    expect(fired).toEqual(["zero", "negative", "nan", "500", "max"]);
    vi.advanceTimersByTime(365 * DAY_MS);
    expect(fired).toHaveLength(5);
  });

  it("systemClock.setTimer arms long timers the same way, unref'd", () => {
    let fired = 0;
    const cancel = systemClock.setTimer(30 * DAY_MS, () => (fired += 1));
    vi.advanceTimersByTime(25 * DAY_MS);
    expect(fired).toBe(0);
    vi.advanceTimersByTime(5 * DAY_MS);
    expect(fired).toBe(1);
    cancel(); // after it fired: harmless
    systemClock.setTimer(30 * DAY_MS, () => (fired += 1))();
    vi.advanceTimersByTime(60 * DAY_MS);
    expect(fired).toBe(1);
  });
});
