/**
 * Per-queue rate limits (token bucket) with a server default, through a real node,
 * the SDK worker and the CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, deferred, runCli } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;

const cli = (...args: string[]) => runCli(node, ...args);

beforeAll(async () => {
  node = await NodeProcess.start({ settings: { rate_limit_rate_per_sec: "50", rate_limit_burst: "10", lease_ttl: "30s" } });
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

const leaseNow = (queue: string, max?: number) => sdk.leaseNow(queue, max);

async function fill(queue: string, n: number, options: object = {}) {
  await sdk.client.enqueueBatch(Array.from({ length: n }, (_, i) => ({ task: newTask("tick", json({ i })), options: { queue, ...options } })));
}

describe("rate limits", () => {
  it("a queue without an override uses the server default (burst, then the rate)", async () => {
    await fill("default-rated", 30);
    expect(await leaseNow("default-rated")).toHaveLength(10);
    const listed = await cli("ratelimit", "ls");
    expect(listed.stdout).toMatch(/\(default\)\s+50\s+10/);
  });

  it("dispatches within a few percent of rate × time + burst", async () => {
    const queue = "rated";
    await cli("ratelimit", "set", queue, "--rate", "20", "--burst", "5");
    await fill(queue, 250);
    // Handlers hold their tasks, so every dispatch stays visible as an active task whose
    // lease started at its dispatch (lease expiry - TTL): the server's own timeline,
    // free of the worker's scheduling noise.
    const windowMs = 3_000;
    const expected = 5 + 20 * (windowMs / 1000);
    let started = 0;
    const enough = deferred();
    const release = deferred();
    sdk.worker(new Mux().handle("tick", async () => {
      if (++started === expected + 5) enough.resolve();
      await release.promise;
    }), { queues: [queue], concurrency: 300 });
    await enough.promise;
    const active = await sdk.admin.listTasks({ queue, state: 4 /* ACTIVE */, pageSize: 1000 });
    const dispatchedAt = active.tasks.map((t) => Number(t.leaseExpiresAtMs) - 30_000).sort((a, b) => a - b);
    const inWindow = dispatchedAt.filter((t) => t - dispatchedAt[0]! <= windowMs).length;
    release.resolve();
    expect(Math.abs(inWindow - expected)).toBeLessThanOrEqual(2);
    // Rate-limited tasks wait pending and spend no retry.
    const waiting = await sdk.admin.listTasks({ queue, state: 2 /* PENDING */, pageSize: 5 });
    expect(waiting.tasks.every((t) => t.retried === 0)).toBe(true);
  });

  it("the key gate comes first: a rate-limited task holds no concurrency slot", async () => {
    const queue = "both-limits";
    await sdk.admin.setQueueRateLimit({ queue, ratePerSec: 0.001, burst: 1 });
    await sdk.admin.setQueueConcurrencyLimit({ queue, max: 1 });
    for (const key of ["a", "a", "b"]) await sdk.client.enqueue(newTask("tick", json({})), { queue, concurrencyKey: key });
    expect(await leaseNow(queue)).toHaveLength(1); // a#1 took the only token
    expect(await leaseNow(queue)).toHaveLength(0); // b waits for a token, a#2 for its key
    const limit = (await sdk.admin.listConcurrencyLimits({})).limits.find((l) => l.queue === queue);
    expect(limit).toMatchObject({ inFlight: 1, held: 1 });
  });

  it("clearing an override falls back to the default; bad values change nothing", async () => {
    const queue = "override";
    await sdk.admin.setQueueRateLimit({ queue, ratePerSec: 0.001, burst: 2 });
    await fill(queue, 20);
    expect(await leaseNow(queue)).toHaveLength(2);
    await expect(sdk.admin.setQueueRateLimit({ queue, ratePerSec: 0, burst: 1 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "rate_per_sec" });
    expect((await sdk.admin.listRateLimits({})).limits.find((l) => l.queue === queue)).toMatchObject({ ratePerSec: 0.001, burst: 2 });
    await cli("ratelimit", "rm", queue);
    expect(await leaseNow(queue)).toHaveLength(10); // the default's burst
    const again = await cli("ratelimit", "rm", queue).catch((e: { code: number; stderr: string }) => e);
    expect(again).toMatchObject({ code: 3 });
    expect((again as { stderr: string }).stderr).toContain("has no rate limit override");
  });
});
