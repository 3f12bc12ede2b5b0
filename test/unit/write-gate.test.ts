import { describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { WriteGate } from "../../src/storage/write-gate.js";

const diskFull = () => new ConveyorError("RESOURCE_EXHAUSTED", "DISK_FULL", "disk full: the data directory /d has no space left");
const MiB = 1024 * 1024;

function gate(start = { nowMs: 0, free: 0 }) {
  const state = { ...start };
  return { state, gate: new WriteGate("/d", { nowMs: () => state.nowMs, freeBytes: () => state.free }) };
}

describe("WriteGate", () => {
  it("is open until a write fails for a full disk; other failures do not close it", () => {
    const { gate: g } = gate();
    expect(g.refusal()).toBeUndefined();
    g.failed(new ConveyorError("UNAVAILABLE", "STORAGE_FAILURE", "io"));
    g.failed(new Error("a bug"));
    expect(g.refusal()).toBeUndefined();
    g.failed(diskFull());
    expect(g.refusal()).toMatchObject({ code: "RESOURCE_EXHAUSTED", reason: "DISK_FULL", message: expect.stringContaining("disk full") });
  });

  it("opens at once when space is freed", () => {
    const { gate: g, state } = gate({ nowMs: 0, free: 4096 });
    g.failed(diskFull());
    state.free = 4096 + MiB / 2;
    expect(g.refusal()).toBeDefined();
    state.free = 4096 + MiB;
    expect(g.refusal()).toBeUndefined();
  });

  it("opens after a backoff that doubles while failures keep coming, and starts over after a quiet minute", () => {
    const { gate: g, state } = gate();
    const reopensAfter = (): number => {
      g.failed(diskFull());
      const from = state.nowMs;
      while (g.refusal()) state.nowMs += 100;
      return state.nowMs - from;
    };
    expect([reopensAfter(), reopensAfter(), reopensAfter(), reopensAfter(), reopensAfter(), reopensAfter(), reopensAfter()])
      .toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    state.nowMs += 60_000;
    expect(reopensAfter()).toBe(1_000);
  });

  it("a failure while closed does not extend the backoff", () => {
    const { gate: g, state } = gate();
    g.failed(diskFull());
    state.nowMs = 500;
    g.failed(diskFull());
    state.nowMs = 1_500;
    expect(g.refusal()).toBeUndefined();
  });
});
