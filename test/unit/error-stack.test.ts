/** The stack a failed attempt carries (src/sdk/error-stack.ts): the head kept, causes followed, bounded. */
import { describe, expect, it } from "vitest";
import { ATTEMPT_STACK_MAX_BYTES } from "../../src/base/limits.js";
import { stackOf } from "../../src/sdk/error-stack.js";

describe("stackOf", () => {
  it("starts with the error's own stack and adds the first lines of each cause", () => {
    const error = new Error("outer", { cause: new RangeError("inner", { cause: "a plain reason" }) });
    const lines = stackOf(error).split("\n");
    expect(lines[0]).toBe("Error: outer");
    expect(lines[1]).toMatch(/^ {4}at /);
    const inner = lines.indexOf("Caused by: RangeError: inner");
    expect(inner).toBeGreaterThan(1);
    expect(lines.slice(inner + 1, inner + 5).every((l) => l.startsWith("    at "))).toBe(true);
    expect(lines.at(-1)).toBe("Caused by: a plain reason");
  });

  it("is empty for a thrown non-Error, ends on a cycle of causes, and stays within its bound", () => {
    expect(stackOf("a string")).toBe("");
    const a = new Error("a");
    const b = new Error("b", { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(stackOf(a).match(/Caused by:/g)).toHaveLength(3);
    const huge = new Error("x".repeat(10_000));
    const text = stackOf(huge);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(ATTEMPT_STACK_MAX_BYTES);
    expect(text.startsWith(`Error: ${"x".repeat(100)}`)).toBe(true);
  });
});
