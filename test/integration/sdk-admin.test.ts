/**
 * The SDK's admin/inspector API (`client.admin`, `Admin`) and `client.waitForResult`
 * against a real node over gRPC (issue 11, item 7): typed answers (numbers, Dates, state
 * names), every action round-tripped, and waits answered by the node when a task ends.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Admin, ConveyorError, Mux, TaskFailedError, WaitTimeoutError, json, newTask } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, deferred, rejection } from "../support/sdk.js";

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

const enqueue = (queue: string, type = "adm:t", options: Parameters<typeof sdk.client.enqueue>[1] = {}) =>
  sdk.client.enqueue(newTask(type, json({})), { queue, ...options });

describe("admin API: queues and tasks", () => {
  it("lists queues with counts as numbers, pauses and resumes", async () => {
    const admin = sdk.client.admin;
    for (let i = 0; i < 3; i++) await enqueue("adm-q");
    const q = await admin.getQueue("adm-q");
    expect(q).toMatchObject({ name: "adm-q", paused: false, concurrencyLimit: undefined });
    expect(q!.counts.pending).toBe(3);
    expect(q!.counts.completed).toBe(0);
    expect(typeof q!.owner).toBe("string");
    expect((await admin.pauseQueue("adm-q")).paused).toBe(true);
    expect((await admin.getQueue("adm-q"))!.paused).toBe(true);
    expect((await admin.resumeQueue("adm-q")).paused).toBe(false);
    expect(await admin.getQueue("adm-no-such-queue")).toBeUndefined();
  });

  it("lists tasks page by page, by state, and iterates them all", async () => {
    const admin = sdk.client.admin;
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await enqueue("adm-list")).id);
    await enqueue("adm-list", "adm:t", { processIn: "1h" });
    const first = await admin.listTasks("adm-list", { state: "pending", pageSize: 2 });
    expect(first.tasks.map((t) => t.id)).toEqual(ids.slice(0, 2));
    expect(first.tasks[0]!.createdAt).toBeInstanceOf(Date);
    expect(first.nextPageToken).toEqual(expect.any(String));
    const all = [];
    for await (const t of admin.tasks("adm-list", { state: "pending", pageSize: 2 })) all.push(t.id);
    expect(all).toEqual(ids);
    const scheduled = await admin.listTasks("adm-list", { state: "scheduled" });
    expect(scheduled.tasks).toHaveLength(1);
    expect(scheduled.nextPageToken).toBeUndefined();
    expect(scheduled.tasks[0]!.readyAt!.getTime()).toBeGreaterThan(Date.now() + 3_000_000);
    await expect(admin.listTasks("adm-list", { state: "nonsense" as never })).rejects.toThrow(/unknown task state "nonsense"/);
  });

  it("runs, archives, retries, cancels and deletes tasks", async () => {
    const admin = sdk.client.admin;
    const later = await enqueue("adm-act", "adm:t", { processIn: "1h" });
    expect((await admin.getTask(later.id)).state).toBe("scheduled");
    expect((await admin.runTask(later.id)).state).toBe("pending");
    const archived = await admin.archiveTask(later.id);
    expect(archived.state).toBe("archived");
    expect(archived.finishedAt).toBeInstanceOf(Date);
    expect((await admin.retryTask(later.id)).state).toBe("pending");
    expect((await admin.cancelTask(later.id)).state).toBe("cancelled");
    await admin.deleteTask(later.id);
    const gone = await rejection(admin.getTask(later.id));
    expect(gone.reason).toBe("TASK_NOT_FOUND");
    const conflict = await rejection(admin.runTask((await enqueue("adm-act")).id));
    expect(conflict.code).toBe("FAILED_PRECONDITION");
  });
});

describe("admin API: limits, groups, strategies, node", () => {
  it("sets, lists and deletes a queue's concurrency and rate limits", async () => {
    const admin = sdk.client.admin;
    await enqueue("adm-limits");
    expect(await admin.setConcurrencyLimit("adm-limits", 3)).toMatchObject({ queue: "adm-limits", max: 3, inFlight: 0, held: 0 });
    expect((await admin.getQueue("adm-limits"))!.concurrencyLimit).toBe(3);
    expect(await admin.listConcurrencyLimits()).toContainEqual({ queue: "adm-limits", max: 3, inFlight: 0, held: 0 });
    await admin.deleteConcurrencyLimit("adm-limits");
    expect((await admin.listConcurrencyLimits()).some((l) => l.queue === "adm-limits")).toBe(false);

    expect(await admin.setRateLimit("adm-limits", { ratePerSec: 2.5, burst: 4 })).toEqual({ queue: "adm-limits", ratePerSec: 2.5, burst: 4 });
    expect((await admin.listRateLimits()).limits).toContainEqual({ queue: "adm-limits", ratePerSec: 2.5, burst: 4 });
    await admin.deleteRateLimit("adm-limits");
    expect((await admin.listRateLimits()).limits.some((l) => l.queue === "adm-limits")).toBe(false);
    const missing = await rejection(admin.deleteRateLimit("adm-limits"));
    expect(missing.reason).toBe("LIMIT_NOT_FOUND");
  });

  it("sets group configs with durations as numbers, and lists a queue's groups with Dates", async () => {
    const admin = sdk.client.admin;
    const config = await admin.setGroupConfig("adm-groups", "g1", { maxSize: 5, maxDelay: "1h", grace: 30_000 });
    expect(config).toEqual({ queue: "adm-groups", group: "g1", maxSize: 5, maxDelayMs: 3_600_000, graceMs: 30_000 });
    expect((await admin.listGroupConfigs("adm-groups")).configs).toContainEqual(config);
    await enqueue("adm-groups", "adm:batch", { group: "g1" });
    const [group] = await admin.listGroups("adm-groups");
    expect(group).toMatchObject({ queue: "adm-groups", group: "g1", type: "adm:batch", state: "aggregating", size: 1 });
    expect(group!.firstMemberAt).toBeInstanceOf(Date);
    expect(group!.nextFireAt).toBeInstanceOf(Date);
    await admin.deleteGroupConfig("adm-groups", "g1");
    expect((await admin.listGroupConfigs("adm-groups")).configs).toEqual([]);
  });

  it("sets, lists and deletes a type's concurrency rules", async () => {
    const admin = sdk.client.admin;
    const set = await admin.setStrategies("adm:ruled", [{ expression: "input.user", maxRuns: 2, limitStrategy: "GROUP_ROUND_ROBIN" }]);
    expect(set.rules).toEqual([{ expression: "input.user", maxRuns: 2, limitStrategy: "GROUP_ROUND_ROBIN" }]);
    expect(set.updatedAt).toBeInstanceOf(Date);
    expect((await admin.listStrategies()).find((t) => t.type === "adm:ruled")?.rules).toEqual(set.rules);
    await admin.deleteStrategies("adm:ruled");
    expect((await admin.listStrategies()).some((t) => t.type === "adm:ruled")).toBe(false);
  });

  it("describes the node; a standalone Admin works the same and says when its node is unreachable", async () => {
    const admin = new Admin({ address: node.grpcAddress });
    try {
      const info = await admin.clusterInfo();
      expect(info.startedAt).toBeInstanceOf(Date);
      expect(typeof info.ringVersion).toBe("number");
      expect(info.members).toContainEqual({ nodeId: info.nodeId, self: true });
    } finally {
      admin.close();
    }
    const nowhere = new Admin({ address: "127.0.0.1:1", connectTimeoutMs: 300 });
    try {
      const error = await rejection(nowhere.listQueues());
      expect(error.reason).toBe("UNREACHABLE");
      expect(error.message).toContain("node unreachable at 127.0.0.1:1");
    } finally {
      nowhere.close();
    }
  });
});

describe("client.waitForResult", () => {
  it("resolves when a worker completes the task, not before", async () => {
    const started = deferred();
    const release = deferred();
    const info = await enqueue("adm-wait-ok", "adm:work");
    let settled = false;
    const waiting = sdk.client.waitForResult(info.id, { timeout: "20s" }).finally(() => (settled = true));
    sdk.worker(new Mux().handle("adm:work", async () => {
      started.resolve();
      await release.promise;
      return { answer: 42 };
    }), { queues: ["adm-wait-ok"], handleSignals: false });
    await started.promise;
    expect(settled).toBe(false);
    release.resolve();
    const result = await waiting;
    expect(result.json()).toEqual({ answer: 42 });
    expect(result.task.state).toBe("completed");
  });

  it("rejects with TaskFailedError when the task is archived after its retries", async () => {
    const info = await enqueue("adm-wait-fail", "adm:fail", { maxRetry: 0 });
    const waiting = sdk.client.waitForResult(info.id, { timeout: "20s" });
    sdk.worker(new Mux().handle("adm:fail", () => {
      throw new Error("boom");
    }), { queues: ["adm-wait-fail"], handleSignals: false });
    const error = await waiting.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(TaskFailedError);
    expect((error as TaskFailedError).task.state).toBe("archived");
    expect((error as TaskFailedError).message).toBe(`task ${info.id} was archived: boom`);
  });

  it("rejects with TaskFailedError when the task is cancelled while waited for", async () => {
    const info = await enqueue("adm-wait-cancel", "adm:none");
    const waiting = sdk.client.waitForResult(info.id).then(() => undefined, (e: unknown) => e);
    await sdk.client.cancelTask(info.id);
    const error = await waiting;
    expect(error).toBeInstanceOf(TaskFailedError);
    expect((error as Error).message).toMatch(new RegExp(`^task ${info.id} was cancelled`));
  });

  it("times out with a clear error naming the task and its state", async () => {
    const info = await enqueue("adm-wait-timeout", "adm:none");
    const startedAt = Date.now();
    const error = await sdk.client.waitForResult(info.id, { timeout: 400 }).then(() => undefined, (e: unknown) => e);
    const waited = Date.now() - startedAt;
    expect(error).toBeInstanceOf(WaitTimeoutError);
    expect((error as Error).message).toBe(`task ${info.id} did not finish within 400 ms (it is pending)`);
    expect(waited).toBeGreaterThanOrEqual(380);
    expect(waited).toBeLessThan(3_000);
  });

  it("resolves at once for a task that already finished", async () => {
    const info = await enqueue("adm-wait-done", "adm:done");
    sdk.worker(new Mux().handle("adm:done", () => "ok"), { queues: ["adm-wait-done"], handleSignals: false });
    await sdk.waitForState(info.id, "completed");
    const startedAt = Date.now();
    const result = await sdk.client.waitForResult(info.id, { timeout: "1m" });
    expect(result.text()).toBe("ok");
    expect(Date.now() - startedAt).toBeLessThan(500);
  });

  it("NOT_FOUND for an unknown task; INVALID_ARGUMENT for a bad timeout", async () => {
    const error = await rejection(sdk.client.waitForResult("adm-no-such-task", { timeout: 1000 }));
    expect(error.reason).toBe("TASK_NOT_FOUND");
    await expect(sdk.client.waitForResult("x", { timeout: 0 })).rejects.toThrow(ConveyorError);
    const raw = await rejection(sdk.taskRpc.waitTask({ id: "x", timeoutMs: 0 }));
    expect(raw.field).toBe("timeout_ms");
  });
});

describe("admin API: the rest of AdminService (issue 38)", () => {
  it("getTask answers with the attempt history, from the client and the admin alike", async () => {
    const info = await enqueue("adm-attempts", "adm:flaky", { maxRetry: 1, backoff: { base: 1 } });
    let calls = 0;
    sdk.worker(new Mux().handle("adm:flaky", () => {
      calls++;
      if (calls === 1) throw new Error("first try fails");
      return "ok";
    }), { queues: ["adm-attempts"], handleSignals: false });
    await sdk.waitForState(info.id, "completed");
    for (const task of [await sdk.client.getTask(info.id), await sdk.client.admin.getTask(info.id)]) {
      expect(task.state).toBe("completed");
      expect(task.attempts.map((a) => [a.number, a.outcome, a.error])).toEqual([[1, "failed", "first try fails"], [2, "succeeded", ""]]);
      expect(task.attempts[0]!.startedAt).toBeInstanceOf(Date);
      expect(task.attempts[0]!.endedAt!.getTime()).toBeGreaterThanOrEqual(task.attempts[0]!.startedAt!.getTime());
      expect(task.attempts[1]!.workerId).not.toBe("");
    }
  });

  it("bulk actions: archive, retry, cancel and delete every task of a queue in a state, with how many changed", async () => {
    const admin = sdk.client.admin;
    for (let i = 0; i < 4; i++) await enqueue("adm-bulk", "adm:none");
    expect(await admin.archiveAll("adm-bulk", "pending")).toEqual({ affected: 4 });
    expect((await sdk.counts("adm-bulk")).archived).toBe(4);
    expect(await admin.retryAll("adm-bulk")).toEqual({ affected: 4 });
    expect(await admin.bulkTaskAction("adm-bulk", "cancel", "pending")).toEqual({ affected: 4 });
    expect(await admin.deleteAll("adm-bulk", "cancelled")).toEqual({ affected: 4 });
    expect(await admin.deleteAll("adm-bulk", "cancelled")).toEqual({ affected: 0 });
    const pair = await rejection(admin.bulkTaskAction("adm-bulk", "retry", "pending"));
    expect(pair.code).toBe("INVALID_ARGUMENT");
    const action = await rejection(admin.bulkTaskAction("adm-bulk", "purge" as never, "pending"));
    expect([action.field, action.message]).toEqual(["action", 'unknown bulk action "purge"; use one of retry, archive, delete, cancel']);
    const state = await rejection(admin.bulkTaskAction("adm-bulk", "delete", "done" as never));
    expect(state.field).toBe("state");
  });

  it("deletes a queue with its finished tasks, and says why it will not", async () => {
    const admin = sdk.client.admin;
    const done = await enqueue("adm-delq", "adm:none");
    await admin.cancelTask(done.id);
    const open = await enqueue("adm-delq", "adm:none");
    const busy = await rejection(admin.deleteQueue("adm-delq"));
    expect([busy.code, busy.reason]).toEqual(["FAILED_PRECONDITION", "QUEUE_HAS_UNFINISHED_TASKS"]);
    await admin.cancelTask(open.id);
    expect(await admin.deleteQueue("adm-delq")).toEqual({ deletedTasks: 2 });
    expect(await admin.getQueue("adm-delq")).toBeUndefined();
    expect((await rejection(admin.deleteQueue("adm-delq"))).reason).toBe("QUEUE_NOT_FOUND");
  });

  it("lists workers and the node's activity with numbers and Dates", async () => {
    const admin = sdk.client.admin;
    const info = await enqueue("adm-workers", "adm:seen");
    sdk.worker(new Mux().handle("adm:seen", () => "ok"), { queues: ["adm-workers"], concurrency: 3, handleSignals: false });
    await sdk.waitForState(info.id, "completed");
    const worker = (await admin.listWorkers()).find((w) => w.queues.includes("adm-workers"));
    expect(worker).toMatchObject({ types: ["adm:seen"], concurrency: 3 });
    expect(worker!.lastSeenAt).toBeInstanceOf(Date);
    expect(worker!.connectedSince).toBeInstanceOf(Date);
    const activity = await admin.activity("adm-workers");
    expect(activity.bucketMs).toBe(60_000);
    const last = activity.buckets.at(-1)!;
    expect(last.startAt).toBeInstanceOf(Date);
    expect(activity.buckets.reduce((n, b) => n + b.enqueued, 0)).toBe(1);
    expect(activity.buckets.reduce((n, b) => n + b.completed, 0)).toBe(1);
  });

  it("a single node's cluster status is a ring of one; drains and moves say it is not a cluster", async () => {
    const admin = sdk.client.admin;
    const status = await admin.clusterStatus();
    expect(status).toMatchObject({ clustered: false, phase: "active", serving: true, ringVersion: 1 });
    expect(status.members).toEqual([expect.objectContaining({ nodeId: status.nodeId, self: true, state: "active", leaseLeftMs: undefined })]);
    expect(status.partitionStates).toHaveLength(status.partitions);
    expect(status.partitionStates[0]).toMatchObject({ partition: 0, owner: status.nodeId, state: "owned", epoch: 1 });
    expect(status.changelog).toBeUndefined();
    const drain = await rejection(admin.drainNode(status.nodeId, { wait: "1s" }));
    expect([drain.code, drain.reason]).toEqual(["FAILED_PRECONDITION", "NOT_A_CLUSTER"]);
    const move = await rejection(admin.movePartition(0, { to: status.nodeId }));
    expect(move.reason).toBe("NOT_A_CLUSTER");
    expect((await rejection(admin.drainNode("x", { wait: "soon" }))).field).toBe("wait");
  });
});
