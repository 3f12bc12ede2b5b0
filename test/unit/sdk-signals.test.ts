/**
 * Which Workers take over SIGINT/SIGTERM (the exit itself is tested with a real child
 * process in test/integration/worker-connection.test.ts). No node is needed: the
 * workers point at a port nobody listens on and are stopped at once.
 */
import { describe, expect, it } from "vitest";
import { Mux, Worker } from "../../src/index.js";

const quiet = { address: "127.0.0.1:1", logger: null } as const;
const listeners = () => [process.listenerCount("SIGINT"), process.listenerCount("SIGTERM")];

describe("Worker signal handling", () => {
  it("by default one listener pair serves every Worker, and leaves with the last one", async () => {
    const before = listeners();
    const a = new Worker({ mux: new Mux(), ...quiet }).start();
    const b = new Worker({ mux: new Mux(), ...quiet }).start();
    expect(listeners()).toEqual(before.map((n) => n + 1));
    await a.stop();
    expect(listeners()).toEqual(before.map((n) => n + 1));
    await b.stop();
    expect(listeners()).toEqual(before);
  });

  it("handleSignals: false leaves the process's signals alone (embedding)", async () => {
    const before = listeners();
    const w = new Worker({ mux: new Mux(), ...quiet, handleSignals: false }).start();
    expect(listeners()).toEqual(before);
    await w.stop();
  });

  it("a second stop() waits for the same stop (a user's own handler beside the default one)", async () => {
    const w = new Worker({ mux: new Mux(), ...quiet }).start();
    const first = w.stop();
    expect(w.stop({ graceMs: 0 })).toBe(first);
    await first;
  });

  it("refuses a negative shutdownTimeoutMs, naming it", () => {
    expect(() => new Worker({ mux: new Mux(), ...quiet, shutdownTimeoutMs: -1 })).toThrow(/shutdownTimeoutMs must be a non-negative number/);
  });
});
