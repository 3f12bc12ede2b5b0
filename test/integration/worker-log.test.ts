/**
 * Workers speak (issue 38): through its `logger`, a Worker says when it starts (node,
 * queues, concurrency, task types), when it registers, each failed or archived task (type,
 * id, attempt, error, what happens next), and when it drains and stops; `logger: null`
 * keeps it quiet. A real node, the SDK worker.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Mux, Worker, json, newTask, skipRetry } from "../../src/index.js";
import { NodeProcess, eventually } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

beforeAll(async () => {
  node = await NodeProcess.start();
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

function capture() {
  const lines: Array<{ level: "info" | "warn"; msg: string }> = [];
  return { lines, logger: { info: (msg: string) => lines.push({ level: "info", msg }), warn: (msg: string) => lines.push({ level: "warn", msg }) } };
}

describe("worker log lines", () => {
  it("start, registration, each failure with what happens next, drain and stop", async () => {
    const { lines, logger } = capture();
    const flaky = await sdk.client.enqueue(newTask("log:flaky", json({})), { queue: "log-q", maxRetry: 1, backoff: { base: 1 } });
    const doomed = await sdk.client.enqueue(newTask("log:doomed", json({})), { queue: "log-q", maxRetry: 5 });
    const mux = new Mux()
      .handle("log:flaky", () => {
        throw new Error("upstream 503");
      })
      .handle("log:doomed", () => {
        throw skipRetry(new Error("bad input"));
      });
    const worker = new Worker({ mux, address: node.grpcAddress, queues: ["log-q"], concurrency: 3, logger, handleSignals: false }).start();
    await sdk.waitForState(flaky.id, "archived");
    await sdk.waitForState(doomed.id, "archived");
    await eventually("three failure lines", async () => (lines.filter((l) => l.level === "warn").length >= 3 ? true : undefined));
    await worker.stop();

    const msgs = lines.map((l) => `${l.level} ${l.msg}`);
    expect(msgs[0]).toBe(`info starting: node ${node.grpcAddress}, queues log-q, concurrency 3, task types log:flaky, log:doomed`);
    expect(msgs[1]).toMatch(new RegExp(`^info registered with the node at ${node.grpcAddress.replaceAll(".", "\\.")} as \\S+$`));
    expect(msgs).toContain(`warn task log:flaky ${flaky.id} failed (attempt 1 of 2): upstream 503; the node retries it`);
    expect(msgs).toContain(`warn task log:flaky ${flaky.id} failed (attempt 2 of 2): upstream 503; archived (no retries left)`);
    expect(msgs).toContain(`warn task log:doomed ${doomed.id} failed (attempt 1 of 6): bad input; archived (skip retry)`);
    expect(msgs.slice(-2)).toEqual(["info draining: no new tasks; none running", "info stopped: 3 task(s) run, 3 failed"]);
  });

  it("logger: null says nothing (not even on stderr)", async () => {
    const stderr = vi.spyOn(process.stderr, "write");
    try {
      const info = await sdk.client.enqueue(newTask("log:quiet", json({})), { queue: "log-quiet", maxRetry: 0 });
      const worker = new Worker({
        mux: new Mux().handle("log:quiet", () => {
          throw new Error("quietly");
        }), address: node.grpcAddress, queues: ["log-quiet"], logger: null, handleSignals: false,
      }).start();
      await sdk.waitForState(info.id, "archived");
      await worker.stop();
      expect(stderr.mock.calls.filter(([text]) => String(text).includes("conveyor worker"))).toEqual([]);
    } finally {
      stderr.mockRestore();
    }
  });
});
