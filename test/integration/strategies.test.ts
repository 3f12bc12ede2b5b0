/**
 * Concurrency strategies through a real node: CEL keys, the five strategies with the
 * seed's A/B/C sequences, chains, shared rules, dynamic limits, evaluation failures,
 * registration by workers and by the CLI, cancellation of running tasks, and restart.
 * Dispatch decisions are checked with raw Lease calls (what is dispatchable right now).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask, type ConcurrencyRuleSpec } from "../../src/index.js";
import { LimitStrategy } from "../../src/gen/conveyor/v1/task_pb.js";
import { Outcome, type Delivery } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, deferred, runCli } from "../support/sdk.js";

let node: NodeProcess;
let sdk: ReturnType<typeof connect>;
const cli = (...args: string[]) => runCli(node, ...args);

beforeAll(async () => {
  node = await NodeProcess.start({ settings: { lease_ttl: "30s" } });
  sdk = connect(node);
});

afterAll(async () => {
  await sdk.close();
  await node.stop();
  node.cleanup();
});

type Strategy = keyof typeof LimitStrategy;
async function setRules(type: string, rules: Array<{ expression: string; maxRuns: number | string; strategy: Strategy; name?: string }>) {
  await sdk.admin.setStrategies({
    type,
    rules: rules.map((r) => ({
      name: r.name ?? "", expression: r.expression, strategy: LimitStrategy[r.strategy],
      maxRuns: typeof r.maxRuns === "number" ? r.maxRuns : 0, maxRunsExpression: typeof r.maxRuns === "string" ? r.maxRuns : "",
    })),
  });
}

const enqueue = (queue: string, type: string, payload: object, metadata?: Record<string, string>) =>
  sdk.client.enqueue(newTask(type, json(payload), metadata), { queue });

const leaseNow = (queue: string, max?: number) => sdk.leaseNow(queue, max);

const idsOf = (ds: Delivery[]) => ds.map((d) => d.tasks[0]!.id);

async function succeed(d: Delivery) {
  const res = await sdk.workerRpc.settle({ workerId: "t", settlements: [{ queue: d.queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome: Outcome.SUCCESS }] });
  return res.results[0]!;
}

describe("concurrency strategies", () => {
  it("GROUP_ROUND_ROBIN holds excess runs per key, and a deep backlog cannot starve another key", async () => {
    const queue = "grr";
    await setRules("grr", [{ expression: "input.group", maxRuns: 2, strategy: "GROUP_ROUND_ROBIN" }]);
    const deep = [];
    for (let i = 0; i < 6; i++) deep.push(await enqueue(queue, "grr", { group: "deep", i }));
    const light = await enqueue(queue, "grr", { group: "light" });
    const first = await leaseNow(queue, 2);
    expect(idsOf(first)).toContain(light.id); // served in turn, not after the whole backlog
    const rest = await leaseNow(queue);
    expect(rest).toHaveLength(1); // deep has 2 running now (its limit)
    await succeed(first.find((d) => d.tasks[0]!.id !== light.id) ?? rest[0]!);
    expect(await leaseNow(queue)).toHaveLength(1);
  });

  it("CANCEL_IN_PROGRESS: the newest run preempts the oldest running one (max 1 and max 2)", async () => {
    for (const max of [1, 2]) {
      const queue = `cip-${max}`;
      const type = `cip${max}`;
      await setRules(type, [{ expression: "input.group", maxRuns: max, strategy: "CANCEL_IN_PROGRESS" }]);
      const olds = [];
      for (let i = 0; i < max; i++) olds.push(await enqueue(queue, type, { group: "g", i }));
      const running = await leaseNow(queue);
      expect(running).toHaveLength(max);
      const newest = await enqueue(queue, type, { group: "g", newest: true });
      expect(await sdk.client.getTask(olds[0]!.id)).toMatchObject({ state: "cancelled", cancelReason: "CONCURRENCY_LIMIT" });
      const hb = await sdk.workerRpc.heartbeat({ workerId: "t", leases: [{ queue, leaseId: running[0]!.leaseId }] });
      expect(hb.leases[0]).toMatchObject({ held: false, cancelRequested: true, cancelReason: "CONCURRENCY_LIMIT" });
      expect(idsOf(await leaseNow(queue))).toEqual([newest.id]); // its slot was given at once
      expect((await succeed(running[0]!)).error).toMatchObject({ reason: "LEASE_NOT_HELD" }); // a late result changes nothing
      expect((await sdk.client.getTask(olds[0]!.id)).state).toBe("cancelled");
    }
  });

  it("CANCEL_NEWEST: a new run is cancelled while the key is at its limit", async () => {
    const queue = "cn";
    await setRules("cn", [{ expression: "input.group", maxRuns: 1, strategy: "CANCEL_NEWEST" }]);
    const a = await enqueue(queue, "cn", { group: "g" });
    const [running] = await leaseNow(queue);
    const b = await enqueue(queue, "cn", { group: "g" });
    expect(b.state).toBe("cancelled");
    expect(await sdk.client.getTask(b.id)).toMatchObject({ cancelReason: "CONCURRENCY_LIMIT", retried: 0 });
    const other = await enqueue(queue, "cn", { group: "other" });
    expect(other.state).toBe("pending");
    await succeed(running!);
    expect((await sdk.client.getTask(a.id)).state).toBe("completed");
  });

  it("CANCEL_QUEUED_EXCEPT_NEWEST: A runs, C replaces B in the queue, then C runs", async () => {
    const queue = "cqen";
    await setRules("cqen", [{ expression: "input.group", maxRuns: 1, strategy: "CANCEL_QUEUED_EXCEPT_NEWEST" }]);
    const a = await enqueue(queue, "cqen", { group: "g", n: "A" });
    const [running] = await leaseNow(queue);
    expect(running!.tasks[0]!.id).toBe(a.id);
    const b = await enqueue(queue, "cqen", { group: "g", n: "B" });
    expect((await sdk.client.getTask(b.id)).state).toBe("pending");
    const c = await enqueue(queue, "cqen", { group: "g", n: "C" });
    expect(await sdk.client.getTask(b.id)).toMatchObject({ state: "cancelled", cancelReason: "CONCURRENCY_LIMIT" });
    expect(await leaseNow(queue)).toHaveLength(0);
    await succeed(running!);
    expect(idsOf(await leaseNow(queue))).toEqual([c.id]);
  });

  it("CANCEL_QUEUED_EXCEPT_OLDEST: A runs, C is cancelled, B runs after A", async () => {
    const queue = "cqeo";
    await setRules("cqeo", [{ expression: "input.group", maxRuns: 1, strategy: "CANCEL_QUEUED_EXCEPT_OLDEST" }]);
    await enqueue(queue, "cqeo", { group: "g", n: "A" });
    const [running] = await leaseNow(queue);
    const b = await enqueue(queue, "cqeo", { group: "g", n: "B" });
    const c = await enqueue(queue, "cqeo", { group: "g", n: "C" });
    expect(c.state).toBe("cancelled");
    expect((await sdk.client.getTask(b.id)).state).toBe("pending");
    await succeed(running!);
    expect(idsOf(await leaseNow(queue))).toEqual([b.id]);
  });

  it("a chain of two rules: a task needs a slot under both and never exceeds either", async () => {
    const queue = "chain";
    const type = "chain";
    const rules: ConcurrencyRuleSpec[] = [
      { expression: "input.tier", maxRuns: 3, limitStrategy: "GROUP_ROUND_ROBIN" },
      { expression: "input.account", maxRuns: 1, limitStrategy: "GROUP_ROUND_ROBIN" },
    ];
    const running = { tier: new Map<string, number>(), account: new Map<string, number>() };
    let worstTier = 0;
    let worstAccount = 0;
    let finished = 0;
    const total = 24;
    const done = deferred();
    const bump = (m: Map<string, number>, k: string, d: number) => {
      m.set(k, (m.get(k) ?? 0) + d);
      return m.get(k)!;
    };
    const worker = sdk.worker(new Mux().handle(type, async (task) => {
      const { tier, account } = task.json<{ tier: string; account: string }>();
      worstTier = Math.max(worstTier, bump(running.tier, tier, 1));
      worstAccount = Math.max(worstAccount, bump(running.account, account, 1));
      await new Promise((r) => setTimeout(r, 3)); // simulated work
      bump(running.tier, tier, -1);
      bump(running.account, account, -1);
      if (++finished === total) done.resolve();
    }, { concurrency: rules }), { queues: [queue], concurrency: 20 });
    await worker.registered;
    for (let i = 0; i < total; i++) await enqueue(queue, type, { tier: i % 2 ? "free" : "pro", account: `acct-${i % 6}` });
    await done.promise;
    expect(worstTier).toBeLessThanOrEqual(3);
    expect(worstAccount).toBe(1);
    const listed = await cli("strategy", "ls");
    expect(listed.stdout).toContain("input.account");
    expect(listed.stdout).toContain("worker");
  });

  it("a shared rule is one budget across task types in different queues", async () => {
    const shared = { name: "tenant", expression: "input.tenant", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" as const };
    await setRules("sync-crm", [shared]);
    await setRules("generate-report", [shared]);
    await enqueue("crm", "sync-crm", { tenant: "acme" });
    await enqueue("reports-q", "generate-report", { tenant: "acme" });
    await enqueue("reports-q", "generate-report", { tenant: "globex" });
    const [crm] = await leaseNow("crm");
    expect(crm).toBeDefined();
    const reports = await leaseNow("reports-q");
    const tenants = reports.map((d) => JSON.parse(new TextDecoder().decode(d.tasks[0]!.payload)).tenant);
    expect(tenants).toEqual(["globex"]); // acme's budget is taken by the other queue
    // Finishing acme's run in one queue lets acme's held task in the other queue run.
    await succeed(crm!);
    const after = await sdk.workerRpc.lease({ workerId: "t", queues: [{ queue: "reports-q", weight: 1 }], maxDeliveries: 10, waitMs: 2_000 });
    expect(after.deliveries).toHaveLength(1);
    expect(JSON.parse(new TextDecoder().decode(after.deliveries[0]!.tasks[0]!.payload))).toEqual({ tenant: "acme" });
  });

  it("rejects registrations that order the same shared rules differently, naming both orders", async () => {
    await setRules("order-a", [
      { name: "x", expression: "'x'", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" },
      { name: "y", expression: "'y'", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" },
    ]);
    const err = await setRules("order-b", [
      { name: "y", expression: "'y'", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" },
      { name: "x", expression: "'x'", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" },
    ]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect((err as Error).message).toContain("[y, x]");
    expect((err as Error).message).toContain("[x, y]");
    expect((await sdk.admin.listStrategies({})).types.some((t) => t.type === "order-b")).toBe(false);
  });

  it("dynamic limits: premium accounts get 3 slots, free ones 1; raising fills at once; CIP cancels above a lowered limit", async () => {
    const queue = "dynamic";
    await setRules("dyn", [{ expression: "input.account", maxRuns: "input.tier == 'premium' ? 3 : 1", strategy: "GROUP_ROUND_ROBIN" }]);
    for (let i = 0; i < 4; i++) await enqueue(queue, "dyn", { account: "p1", tier: "premium" });
    for (let i = 0; i < 2; i++) await enqueue(queue, "dyn", { account: "f1", tier: "free" });
    const got = await leaseNow(queue);
    const byAccount = (ds: Delivery[], a: string) => ds.filter((d) => JSON.parse(new TextDecoder().decode(d.tasks[0]!.payload)).account === a).length;
    expect([byAccount(got, "p1"), byAccount(got, "f1")]).toEqual([3, 1]);
    // The newest f1 task says premium: f1's limit rises to 3 and its held task runs at once.
    await enqueue(queue, "dyn", { account: "f1", tier: "premium" });
    expect(byAccount(await leaseNow(queue), "f1")).toBe(2);

    await setRules("dyn-cip", [{ expression: "input.account", maxRuns: "int(input.max)", strategy: "CANCEL_IN_PROGRESS" }]);
    const q2 = "dynamic-cip";
    const three = [];
    for (let i = 0; i < 3; i++) three.push(await enqueue(q2, "dyn-cip", { account: "a", max: 3 }));
    expect(await leaseNow(q2)).toHaveLength(3);
    await enqueue(q2, "dyn-cip", { account: "a", max: 1 }); // the limit drops to 1: keep only the newest
    const states = await Promise.all(three.map(async (t) => (await sdk.client.getTask(t.id)).state));
    expect(states).toEqual(["cancelled", "cancelled", "cancelled"]);
    expect(await leaseNow(q2)).toHaveLength(1);
  });

  it("an expression that fails at enqueue fails the task with the evaluation error", async () => {
    await setRules("needs-user", [{ expression: "input.user", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" }]);
    const info = await enqueue("eval-fail", "needs-user", { nobody: true });
    const task = await sdk.client.getTask(info.id);
    expect(task.state).toBe("archived");
    expect(task.lastError).toContain("input.user");
    expect(task.lastError).toContain("field not found");
  });

  it("a rule that does not compile is INVALID_ARGUMENT naming the rule and the position", async () => {
    const err = await setRules("broken", [{ expression: "input.user +", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" }]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "INVALID_ARGUMENT", field: "rules[0].expression" });
    expect((err as Error).message).toMatch(/1:12/);
    const worker = sdk.worker(new Mux().handle("broken-too", async () => {}, {
      concurrency: [{ expression: "(", maxRuns: 1, limitStrategy: "GROUP_ROUND_ROBIN" }],
    }), { queues: ["nowhere"] });
    await expect(worker.registered).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "types[0].concurrency[0].expression" });
  });

  it("a running task cancelled by a strategy sees its AbortSignal fire", async () => {
    const queue = "abort";
    const started = deferred();
    const aborted = deferred<string>();
    const worker = sdk.worker(new Mux().handle("abortable", async (_t, { signal }) => {
      started.resolve();
      await new Promise((resolve) => signal.addEventListener("abort", resolve));
      aborted.resolve(String(signal.reason));
    }, { concurrency: [{ expression: "'all'", maxRuns: 1, limitStrategy: "CANCEL_IN_PROGRESS" }] }), { queues: [queue] });
    // The rule exists once the worker has registered it; a task enqueued before that has no rule to cancel it.
    await worker.registered;
    await enqueue(queue, "abortable", { n: 1 });
    await started.promise;
    await enqueue(queue, "abortable", { n: 2 });
    expect(await aborted.promise).toContain("CONCURRENCY_LIMIT");
    const metrics = await node.metrics();
    expect(metrics).toMatch(/conveyor_tasks_cancelled_total\{queue="abort",strategy="CANCEL_IN_PROGRESS",reason="CONCURRENCY_LIMIT"\} 1/);
  });

  it("the CLI sets, lists and removes rules", async () => {
    await cli("strategy", "set", "cli-type", "--expression", "input.k", "--max-runs", "2", "--strategy", "cancel-newest");
    const ls = await cli("strategy", "ls");
    expect(ls.stdout).toMatch(/cli-type.*input\.k.*2.*CANCEL_NEWEST.*operator/s);
    await cli("strategy", "rm", "cli-type");
    expect((await cli("strategy", "ls", "--json")).stdout).not.toContain("cli-type");
  });
});

describe("strategies across a restart", () => {
  it("queued and running keyed tasks keep their limits exactly", async () => {
    let local = await NodeProcess.start({ settings: { lease_ttl: "30s" } });
    let s = connect(local);
    try {
      await s.admin.setStrategies({ type: "r", rules: [{ expression: "input.k", maxRuns: 2, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] });
      for (let i = 0; i < 5; i++) await s.client.enqueue(newTask("r", json({ k: "same" })), { queue: "rq" });
      const lease = async () => (await s.workerRpc.lease({ workerId: "t", queues: [{ queue: "rq", weight: 1 }], maxDeliveries: 10, waitMs: 0 })).deliveries;
      const running = await lease();
      expect(running).toHaveLength(2);
      await local.kill();
      await s.close();
      local = await local.restart();
      s = connect(local);
      expect(await lease()).toHaveLength(0);
      await s.workerRpc.settle({ workerId: "t", settlements: [{ queue: "rq", leaseId: running[0]!.leaseId, taskId: running[0]!.tasks[0]!.id, outcome: Outcome.SUCCESS }] });
      expect(await lease()).toHaveLength(1);
    } finally {
      await s.close();
      await local.stop();
      local.cleanup();
    }
  });
});
