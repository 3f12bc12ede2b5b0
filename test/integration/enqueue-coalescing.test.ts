/**
 * The SDK's coalesced enqueues against a real node: overlapping `client.enqueue` calls go
 * out as a few EnqueueBatch calls (the node's RPC counters say how many), and each caller
 * gets what a single Enqueue gives it: a bad item fails only its own caller, with the
 * same code, reason, message and field as alone (`coalesceEnqueues: false`); a batch the
 * node refuses as a whole (a scoped token and one queue outside the scope) is sent again
 * item by item, so only the out-of-scope caller is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, json, newTask, type EnqueueOptions, type NewTaskSpec } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { outcome } from "../support/sdk.js";
import { authFileWithRoles } from "../support/security.js";

/** Sum of `conveyor_rpc_duration_seconds_count` for one method, over every status code. */
function rpcCount(metrics: string, method: string): number {
  let sum = 0;
  for (const line of metrics.split("\n")) {
    const m = /^conveyor_rpc_duration_seconds_count\{(.*)\} (\S+)$/.exec(line);
    if (m && m[1]!.split(",").includes(`method="${method}"`)) sum += Number(m[2]);
  }
  return sum;
}

describe("coalesced enqueues on one node", () => {
  let node: NodeProcess;
  let coalescing: Client;
  let alone: Client;

  beforeAll(async () => {
    node = await NodeProcess.start();
    coalescing = new Client({ address: node.grpcAddress });
    alone = new Client({ address: node.grpcAddress, coalesceEnqueues: false });
  });

  afterAll(async () => {
    coalescing?.close();
    alone?.close();
    await node?.stop();
    node?.cleanup();
  });

  const calls = async () => {
    const text = await node.metrics();
    return { enqueue: rpcCount(text, "enqueue"), batch: rpcCount(text, "enqueueBatch") };
  };

  it("200 concurrent enqueues with one invalid item: one caller fails as alone, the rest succeed, in a few calls", async () => {
    const before = await calls();
    const bad = 117;
    const promises = Array.from({ length: 200 }, (_, i) =>
      coalescing.enqueue(newTask("t", json({ i })), { queue: "coalesced", ...(i === bad ? { priority: 42 } : {}) }));
    const outcomes = await Promise.allSettled(promises);
    const after = await calls();

    const failed = outcomes.flatMap((o, i) => (o.status === "rejected" ? [i] : []));
    expect(failed).toEqual([bad]);
    const ids = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value.id] : []));
    expect(new Set(ids).size).toBe(199);

    const single = await outcome(alone.enqueue(newTask("t", json({ i: bad })), { queue: "coalesced", priority: 42 }));
    expect(await outcome(promises[bad]!)).toEqual(single);
    expect(single).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "task.priority" });

    // All 200 overlapped (one turn): one batch, nothing alone. The single Enqueue above is the other call.
    expect(after.batch - before.batch).toBe(1);
    expect(after.enqueue - before.enqueue).toBe(0);
  });

  it("each kind of bad item gets, coalesced, exactly the error a single Enqueue gives", async () => {
    await alone.enqueue(newTask("t", json({ v: 1 })), { queue: "parity", taskId: "parity-id" });
    await alone.enqueue(newTask("t", json({})), { queue: "parity", uniqueKey: "held", processIn: "1h" });
    const bad: Array<[NewTaskSpec, EnqueueOptions]> = [
      [newTask("t", json({})), { queue: "parity", priority: 0 }],
      [newTask("t", json({})), { queue: "not a queue name!" }],
      [newTask("", json({})), { queue: "parity" }],
      [newTask("t", json({}), { ["k".repeat(10_000)]: "v" }), { queue: "parity" }],
      [newTask("t", json({})), { queue: "parity", timeout: -5 }],
      [newTask("t", json({})), { queue: "parity", taskId: "x".repeat(10_000) }],
      [newTask("t", json({})), { queue: "parity-elsewhere", taskId: "parity-id" }], // TASK_ID_CONFLICT (another queue has it)
      [newTask("t", json({})), { queue: "parity", uniqueKey: "held" }], // UNIQUE_KEY_CONFLICT
    ];
    const singles = [];
    for (const [task, options] of bad) singles.push(await outcome(alone.enqueue(task, options)));
    // Each bad item among good neighbours, all in one turn.
    const mixed = bad.flatMap(([task, options]) => [
      coalescing.enqueue(newTask("ok", json({})), { queue: "parity" }),
      coalescing.enqueue(task, options),
    ]);
    const got = await Promise.all(mixed.map(outcome));
    expect(got.filter((_, i) => i % 2 === 1)).toEqual(singles);
    for (const g of got.filter((_, i) => i % 2 === 0)) expect(g).toMatchObject({ ok: { state: "pending" } });
    expect(singles.map((s) => (s as { reason?: string }).reason)).toEqual(["INVALID_FIELD", "INVALID_FIELD", "INVALID_FIELD", "INVALID_FIELD",
      "INVALID_FIELD", "INVALID_FIELD", "TASK_ID_CONFLICT", "UNIQUE_KEY_CONFLICT"]);
  });

  it("with coalescing off, every call is its own Enqueue", async () => {
    const before = await calls();
    await Promise.all(Array.from({ length: 20 }, (_, i) => alone.enqueue(newTask("t", json({ i })), { queue: "alone" })));
    const after = await calls();
    expect(after.enqueue - before.enqueue).toBe(20);
    expect(after.batch - before.batch).toBe(0);
  });
});

describe("coalesced enqueues with a token scoped to some queues", () => {
  let node: NodeProcess;
  let coalescing: Client;
  let alone: Client;

  beforeAll(async () => {
    const auth = authFileWithRoles({ scoped: ["mine-*"], metricsPublic: true });
    node = await NodeProcess.start({ settings: { auth_file: auth.file } });
    coalescing = new Client({ address: node.grpcAddress, token: auth.scopedTokens.producer });
    alone = new Client({ address: node.grpcAddress, token: auth.scopedTokens.producer, coalesceEnqueues: false });
  });

  afterAll(async () => {
    coalescing?.close();
    alone?.close();
    await node?.stop();
    node?.cleanup();
  });

  it("a queue outside the scope refuses only its caller (the node refuses the whole batch; each call goes again alone)", async () => {
    const promises = Array.from({ length: 10 }, (_, i) =>
      coalescing.enqueue(newTask("t", json({ i })), { queue: i === 4 ? "theirs" : "mine-a" }));
    const got = await Promise.all(promises.map(outcome));
    const single = await outcome(alone.enqueue(newTask("t", json({ i: 4 })), { queue: "theirs" }));
    expect(single).toMatchObject({ code: "PERMISSION_DENIED", reason: "QUEUE_NOT_IN_SCOPE" });
    expect(got[4]).toEqual(single);
    expect(got.filter((g, i) => i !== 4 && (g as { ok?: { state: string } }).ok?.state === "pending").length).toBe(9);
  });
});
