/**
 * Failures keep their stack (issue 38): a handler's thrown error reaches the node with its
 * stack trace and the first lines of its cause chain; the attempt history keeps it (cut to
 * ATTEMPT_STACK_MAX_BYTES, also when a worker sends more); `getTask` and `conveyor task
 * get` show it. A real node, the SDK worker, the real CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { ATTEMPT_STACK_MAX_BYTES } from "../../src/base/limits.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, runCli } from "../support/sdk.js";

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

function fetchInvoice(): never {
  throw new Error("upstream 503 Service Unavailable", { cause: new TypeError("socket hang up") });
}

describe("attempt stacks", () => {
  it("a thrown error's stack and cause reach getTask and `task get`", async () => {
    const info = await sdk.client.enqueue(newTask("stack:fail", json({})), { queue: "stacks", maxRetry: 0 });
    sdk.worker(new Mux().handle("stack:fail", () => fetchInvoice()), { queues: ["stacks"], handleSignals: false });
    await sdk.waitForState(info.id, "archived");
    const [attempt] = (await sdk.client.getTask(info.id)).attempts;
    expect(attempt!.error).toBe("upstream 503 Service Unavailable");
    const lines = attempt!.stack.split("\n");
    expect(lines[0]).toBe("Error: upstream 503 Service Unavailable");
    expect(lines[1]).toMatch(/^ {4}at fetchInvoice \(.*attempt-stacks\.test\.ts:\d+:\d+\)$/);
    expect(attempt!.stack).toMatch(/\nCaused by: TypeError: socket hang up\n {4}at /);
    expect((await sdk.client.admin.getTask(info.id)).attempts[0]!.stack).toBe(attempt!.stack);

    const { stdout } = await runCli(node, "task", "get", info.id);
    expect(stdout).toContain("stack of attempt 1:\n  Error: upstream 503 Service Unavailable\n      at fetchInvoice (");
    expect(stdout).toContain("  Caused by: TypeError: socket hang up");
  });

  it("a thrown non-Error has no stack; the node cuts an oversized stack to its bound", async () => {
    const plain = await sdk.client.enqueue(newTask("stack:plain", json({})), { queue: "stacks-plain", maxRetry: 0 });
    sdk.worker(new Mux().handle("stack:plain", () => {
      throw "just a string"; // eslint-disable-line @typescript-eslint/only-throw-error
    }), { queues: ["stacks-plain"], handleSignals: false });
    await sdk.waitForState(plain.id, "archived");
    expect((await sdk.client.getTask(plain.id)).attempts[0]).toMatchObject({ error: "just a string", stack: "" });

    // A worker of another SDK may send more than the bound: the node keeps the head.
    const big = await sdk.client.enqueue(newTask("stack:big", json({})), { queue: "stacks-big", maxRetry: 0 });
    const [delivery] = await sdk.leaseNow("stacks-big");
    const stack = `Error: big\n${"    at frame (file.js:1:1)\n".repeat(2_000)}`;
    const res = await sdk.workerRpc.settle({
      workerId: "w", settlements: [{ queue: "stacks-big", leaseId: delivery!.leaseId, taskId: big.id, outcome: Outcome.RETRY, error: "big", stack }],
    });
    expect(res.results[0]!.error).toBeUndefined();
    const kept = (await sdk.client.getTask(big.id)).attempts[0]!.stack;
    console.log(`a ${stack.length}-byte stack was kept as ${Buffer.byteLength(kept)} bytes`);
    expect(kept.startsWith("Error: big\n    at frame (file.js:1:1)\n")).toBe(true);
    expect(Buffer.byteLength(kept)).toBeLessThanOrEqual(ATTEMPT_STACK_MAX_BYTES + 64);
    expect(kept).toMatch(/truncated|bytes/);
  });
});
