import { describe, expect, it } from "vitest";
import { failureLine, LOGGED_ERROR_MAX_CHARS } from "../../src/sdk/worker-log.js";

describe("a worker's failure line", () => {
  const task = { type: "img:resize", id: "t1", retried: 0, maxRetry: 2 };

  it("names the task, the attempt, the error and what the node does next", () => {
    expect(failureLine(task, "upstream 503", false)).toBe("task img:resize t1 failed (attempt 1 of 3): upstream 503; the node retries it");
    expect(failureLine({ ...task, retried: 2 }, "boom", false)).toMatch(/attempt 3 of 3\): boom; archived \(no retries left\)$/);
    expect(failureLine(task, "bad input", true)).toMatch(/; archived \(skip retry\)$/);
  });

  it("shows a long error's beginning and its length, not all of it", () => {
    const line = failureLine(task, "m".repeat(400_000), false);
    expect(line.length).toBeLessThan(LOGGED_ERROR_MAX_CHARS + 200);
    expect(line).toContain("… (400000 characters); the node retries it");
  });
});
