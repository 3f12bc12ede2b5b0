/**
 * The local QueueRef over a real grain host and SQLite file: each call's turn runs when
 * the call is made, its promise resolves only once the node's group commit has happened,
 * calls of one event-loop turn share that commit, and the ref is a handle on the queue
 * (it survives the grain's passivation).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/base/clock.js";
import { ConveyorError } from "../../src/base/errors.js";
import { seededRandom } from "../../src/base/random.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { LocalQueueRef } from "../../src/grains/runtime/queue-ref.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { Database } from "../../src/storage/database.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { newTask } from "../support/core-fixtures.js";

let dir: string;
let db: Database;
let store: TaskStore;
let host: GrainHost;
let leaseIds = 0;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-ref-"));
  db = new Database({ path: join(dir, "conveyor.db"), synchronous: "normal" });
  store = new TaskStore(db, { deadRetentionMs: 60_000 });
  host = new GrainHost({
    store, clock: systemClock, random: seededRandom(1), newId: () => `lease-${++leaseIds}`,
    core: { leaseTtlMs: 30_000, groupDefaults: { maxSize: 10, maxDelayMs: 1_000, graceMs: 100 } },
    idleMs: 60_000, logger: pino({ level: "silent" }),
    hooks: { onEvents: () => {} },
    sharedSlots: new SharedSlotLedger(),
  });
});

afterEach(() => {
  host.stop();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const refOf = (queue: string) => new LocalQueueRef(queue, host, store);

/** Whether `promise` has settled after every queued microtask ran (but before any setImmediate). */
async function settledNow(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(() => (settled = true), () => (settled = true));
  for (let i = 0; i < 20; i++) await Promise.resolve();
  return settled;
}

describe("LocalQueueRef", () => {
  it("runs the turn when called and resolves only after the commit", async () => {
    const commitsBefore = db.commits;
    const task = newTask({ queue: "q" });
    const pending = refOf("q").enqueue([task], false);
    // The turn ran synchronously: the grain is in memory and the row is written (uncommitted).
    expect(host.peek("q")).toBeDefined();
    expect(db.sqlite.inTransaction).toBe(true);
    expect(await settledNow(pending)).toBe(false);
    const [outcome] = await pending;
    expect(outcome).toMatchObject({ ok: true, id: task.id, existed: false });
    expect(db.commits).toBe(commitsBefore + 1);
    expect(db.sqlite.inTransaction).toBe(false);
  });

  it("shares one commit among calls made in one event-loop turn", async () => {
    const commitsBefore = db.commits;
    await Promise.all([
      refOf("a").enqueue([newTask({ queue: "a" })], false),
      refOf("b").enqueue([newTask({ queue: "b" })], false),
      refOf("a").setPaused(true),
    ]);
    expect(db.commits).toBe(commitsBefore + 1);
    expect(host.peek("a")!.paused).toBe(true);
  });

  it("leases, settles and acts, each answering after its commit", async () => {
    const ref = refOf("q");
    const [a, b] = [newTask({ queue: "q" }), newTask({ queue: "q" })];
    await ref.enqueue([a, b], false);
    const [delivery] = await ref.lease(1);
    expect(delivery!.tasks.map((t) => t.id)).toEqual([a.id]);
    const commitsBefore = db.commits;
    const settled = ref.settle([{ leaseId: delivery!.leaseId, taskId: a.id, outcome: "success" }]);
    expect(await settledNow(settled)).toBe(false);
    expect(await settled).toEqual([null]);
    expect(db.commits).toBe(commitsBefore + 1);
    expect(store.getTask(a.id)!.state).toBe("completed");

    const cancelled = await ref.act(b.id, "cancel");
    expect(cancelled!.state).toBe("cancelled");
    // An action the grain refuses rejects with the grain's error.
    await expect(ref.act(a.id, "cancel")).rejects.toMatchObject({ reason: "TASK_STATE_CONFLICT" });
  });

  it("reports live stats only for a grain in memory, without activating it", async () => {
    expect(await refOf("cold").stats()).toBeUndefined();
    expect(host.peek("cold")).toBeUndefined();
    await refOf("warm").setKeyLimit(2);
    expect(await refOf("warm").stats()).toMatchObject({ keyLimit: 2 });
  });

  it("is a handle on the queue: a passivated grain is activated again by the next call", async () => {
    const ref = refOf("q");
    const task = newTask({ queue: "q" });
    await ref.enqueue([task], false);
    host.deactivate("q", "idle");
    expect(host.peek("q")).toBeUndefined();
    const [delivery] = await ref.lease(1);
    expect(delivery!.tasks[0]!.id).toBe(task.id);
    await ref.activate();
    expect(host.peek("q")).toBeDefined();
  });

  it("answers a refused task of a non-atomic call as its outcome, not a rejection", async () => {
    const ref = refOf("q");
    const task = newTask({ queue: "q", uniqueKey: "u" });
    await ref.enqueue([task], true);
    const [dup] = await ref.enqueue([newTask({ queue: "q", uniqueKey: "u" })], false);
    expect(dup).toMatchObject({ ok: false });
    expect((dup as { error: ConveyorError }).error.reason).toBe("UNIQUE_KEY_CONFLICT");
  });
});
