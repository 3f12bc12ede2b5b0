/** The per-minute activity ring under a fake clock. */
import { describe, expect, it } from "vitest";
import { ActivityHistory } from "../../src/server/activity-history.js";
import { ACTIVITY_MINUTES } from "../../src/base/limits.js";

const MIN = 60_000;

describe("ActivityHistory", () => {
  it("counts per minute, per queue and node-wide, for the last hour", () => {
    let now = 100 * MIN + 5_000;
    const h = new ActivityHistory(() => now);
    h.add("a", "enqueued", 3);
    h.add("a", "completed");
    h.add("b", "retried");
    now += MIN;
    h.add("b", "archived", 2);
    const all = h.series("");
    expect(all).toHaveLength(ACTIVITY_MINUTES);
    expect(all.at(-1)).toEqual({ startMs: 101 * MIN, enqueued: 0, completed: 0, retried: 0, archived: 2 });
    expect(all.at(-2)).toEqual({ startMs: 100 * MIN, enqueued: 3, completed: 1, retried: 1, archived: 0 });
    expect(h.series("a").at(-2)).toEqual({ startMs: 100 * MIN, enqueued: 3, completed: 1, retried: 0, archived: 0 });
    expect(h.series("nosuch").every((b) => b.enqueued + b.completed + b.retried + b.archived === 0)).toBe(true);
  });

  it("forgets minutes older than the window, even when their slot is reused", () => {
    let now = 100 * MIN;
    const h = new ActivityHistory(() => now);
    h.add("a", "completed", 7);
    now += (ACTIVITY_MINUTES - 1) * MIN;
    expect(h.series("a")[0]).toMatchObject({ startMs: 100 * MIN, completed: 7 });
    now += MIN; // minute 100 is out of the window; its slot now belongs to minute 160
    expect(h.series("a").reduce((n, b) => n + b.completed, 0)).toBe(0);
    h.add("a", "completed", 1);
    expect(h.series("a").at(-1)).toMatchObject({ startMs: 160 * MIN, completed: 1 });
  });

  it("drops queues quiet for the whole window", () => {
    let now = 100 * MIN;
    const h = new ActivityHistory(() => now);
    h.add("old", "enqueued");
    now += ACTIVITY_MINUTES * MIN;
    h.add("new", "enqueued");
    expect(h.queueCount).toBe(1);
  });
});
