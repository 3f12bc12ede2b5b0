/**
 * queue_counts (migration 009) stays exact: after every step of a scripted workload run
 * through the real grain runtime on a real SQLite file (enqueue, lease, settle with each
 * outcome, a lapsed lease, a scheduled task coming due, cancel, archive, delete, retry,
 * bulk actions, the retention janitor, queue removal, a restart), the kept counts equal a
 * COUNT(*) of the rows, and ListQueues / GetQueue / the depth gauges / the start-up scan
 * read them. Time moves only when the test advances the fake clock.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { LocalQueueRef } from "../../src/grains/runtime/queue-ref.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import type { NewTask } from "../../src/grains/queue/task.js";
import { Janitor } from "../../src/server/janitor.js";
import { AdminQueries } from "../../src/storage/admin-queries.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, leaseIdCounter, LEASE_TTL_MS, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

const DEAD_RETENTION_MS = 7 * 86_400_000;
const JANITOR_INTERVAL_MS = 10_000;

interface Node {
  dataDir: DataDir;
  store: TaskStore;
  queries: AdminQueries;
  host: GrainHost;
  janitor: Janitor;
}

let dir: string;
let clock: FakeClock;
let node: Node;

/** The node's storage, grain host and janitor on `dir` (see src/server/node.ts), without transports. */
function startNode(): Node {
  const dataDir = openDataDir({ dir, synchronous: "normal" });
  const store = new TaskStore(dataDir.db, { deadRetentionMs: DEAD_RETENTION_MS });
  const queries = new AdminQueries(dataDir.db);
  const host = new GrainHost({
    store, clock, random: seededRandom(7), newId: leaseIdCounter(), core: coreConfig(), idleMs: 60_000,
    logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(), hooks: { onEvents: () => {} }, onLifecycle: () => {},
  });
  host.link({ onReady: () => {}, isPinned: () => false, onReminder: (q) => void host.get(q) });
  host.start();
  const janitor = new Janitor({
    purge: (nowMs, limit) => queries.purgeFinished(nowMs, limit), committed: () => dataDir.db.committed(),
    clock, intervalMs: JANITOR_INTERVAL_MS, logger: pino({ level: "silent" }),
  });
  janitor.start();
  return { dataDir, store, queries, host, janitor };
}

function stopNode(): void {
  node.janitor.stop();
  node.host.stop();
  node.dataDir.close();
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-counts-"));
  clock = new FakeClock();
  node = startNode();
});

afterEach(() => {
  stopNode();
  rmSync(dir, { recursive: true, force: true });
});

const ref = (queue: string) => new LocalQueueRef(queue, node.host, node.store);
const task = (queue: string, overrides: Partial<NewTask> = {}): NewTask => newTask({ queue, ...overrides });

/** Count rows of every (queue, state) in the data file: the ground truth. */
function truth(): Record<string, number> {
  const rows = node.dataDir.db.sqlite.prepare("SELECT queue, state, COUNT(*) AS n FROM tasks GROUP BY queue, state").all() as
    Array<{ queue: string; state: string; n: number }>;
  return Object.fromEntries(rows.map((r) => [`${r.queue}/${r.state}`, r.n]));
}

/** What ListQueues reports, in the same shape (states with 0 left out). */
function listed(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const q of node.queries.listQueues()) for (const [state, n] of Object.entries(q.counts)) if (n > 0) out[`${q.name}/${state}`] = n;
  return out;
}

/** Every count source agrees with the rows, once the step's writes are committed. */
async function expectExact(): Promise<Record<string, number>> {
  await node.dataDir.db.committed();
  const expected = truth();
  expect(listed()).toEqual(expected);
  for (const q of node.queries.listQueues()) expect(node.queries.queueSummary(q.name).counts).toEqual(q.counts);
  const unfinished = new Set(["scheduled", "pending", "aggregating", "active", "retry"]);
  expect(Object.fromEntries(node.queries.depth().map((r) => [`${r.queue}/${r.state}`, r.n])))
    .toEqual(Object.fromEntries(Object.entries(expected).filter(([k]) => unfinished.has(k.split("/")[1]!))));
  const withUnfinished = [...new Set(Object.keys(expected).filter((k) => unfinished.has(k.split("/")[1]!)).map((k) => k.split("/")[0]))];
  expect(node.queries.queuesWithUnfinishedTasks().sort()).toEqual(withUnfinished.sort());
  return expected;
}

describe("queue_counts", () => {
  it("equals a count of the rows after every step of a workload, and after a restart", async () => {
    const a = ref("a");
    const ids = (list: NewTask[]) => list.map((t) => t.id);
    const batch = Array.from({ length: 12 }, () => task("a", { retentionMs: 60_000 }));
    await a.enqueue(batch, false);
    await a.enqueue([task("a", { processAtMs: clock.nowMs() + 5_000, retentionMs: 60_000 })], false);
    await ref("b").enqueue([task("b"), task("b")], false);
    expect(await expectExact()).toMatchObject({ "a/pending": 12, "a/scheduled": 1, "b/pending": 2 });

    // Lease six and settle them every way: completed, retried, archived (skip_retry), released.
    const leased = (await a.lease(6)).flatMap((d) => d.tasks.map((t) => ({ taskId: t.id, leaseId: d.leaseId })));
    expect(leased).toHaveLength(6);
    await expectExact();
    const outcomes = ["success", "success", "retry", "skip_retry", "released"] as const;
    await a.settle(outcomes.map((outcome, i) => ({ ...leased[i]!, outcome, error: "boom" })));
    expect(await expectExact()).toMatchObject({ "a/completed": 2, "a/retry": 1, "a/archived": 1, "a/active": 1 });

    // The last lease lapses; the scheduled task comes due; the retry's backoff ends.
    clock.advance(LEASE_TTL_MS * 2);
    await expectExact();
    clock.advance(5_000);
    expect((await expectExact())["a/scheduled"]).toBeUndefined();
    clock.advance(60_000);
    await expectExact();

    // Operator actions on single tasks.
    const [toCancel, toArchive, toDelete] = ids(batch.slice(8, 11));
    await a.act(toCancel!, "cancel");
    await a.act(toArchive!, "archive");
    await a.act(toDelete!, "delete");
    await expectExact();
    await a.act(toCancel!, "retry"); // a cancelled task back to pending
    await a.act(leased[0]!.taskId, "delete"); // a finished one deleted
    expect(await expectExact()).toMatchObject({ "a/completed": 1 });

    // Bulk actions over unfinished and finished states.
    await ref("b").bulkAct("cancel", "pending");
    await expectExact();
    await ref("b").bulkAct("retry", "cancelled");
    await ref("b").bulkAct("archive", "pending");
    await a.bulkAct("delete", "archived");
    expect(await expectExact()).toMatchObject({ "b/archived": 2 });

    // Run everything left in "a" to completion (completed tasks keep a 60 s retention).
    for (let round = 0; round < 5; round++) {
      const more = (await a.lease(20)).flatMap((d) => d.tasks.map((t) => ({ taskId: t.id, leaseId: d.leaseId, outcome: "success" as const })));
      if (more.length === 0) break;
      await a.settle(more);
      clock.advance(60_000);
    }
    await expectExact();

    // A restart: the counts on disk are the counts.
    stopNode();
    node = startNode();
    await expectExact();

    // The janitor deletes the expired completed tasks; the archived ones of "b" stay (dead retention).
    clock.advance(JANITOR_INTERVAL_MS);
    expect(await node.janitor.settled()).toBeGreaterThan(0);
    const left = await expectExact();
    expect(left["a/completed"]).toBeUndefined();
    expect(left["b/archived"]).toBe(2);

    // Removing "b" deletes its finished tasks and its count rows: it is no longer listed.
    await ref("b").remove();
    await expectExact();
    expect(node.queries.listQueues().map((q) => q.name)).not.toContain("b");
    expect(node.dataDir.db.sqlite.prepare("SELECT COUNT(*) AS n FROM queue_counts WHERE queue = 'b'").get()).toEqual({ n: 0 });
    // A new task of the removed queue counts from 1 again.
    await ref("b").enqueue([task("b")], false);
    expect(await expectExact()).toMatchObject({ "b/pending": 1 });
  });

  it("a turn the data file refuses leaves the counts as they were (they change in the same transaction)", async () => {
    const a = ref("a");
    await a.enqueue([task("a"), task("a")], false);
    node.dataDir.db.sqlite.exec(`CREATE TRIGGER refuse_activation BEFORE UPDATE OF state ON tasks
      WHEN NEW.state = 'active' BEGIN SELECT RAISE(ABORT, 'activation refused'); END`);
    await expect(a.lease(2)).rejects.toMatchObject({ reason: "STORAGE_REJECTED" });
    expect(await expectExact()).toEqual({ "a/pending": 2 });
  });
});

describe("Janitor", () => {
  it("drains a backlog far larger than one chunk in one run, in many commits", async () => {
    const a = ref("a");
    const n = 3_000;
    for (let i = 0; i < n; i += 500) {
      await a.enqueue(Array.from({ length: 500 }, () => task("a", { retentionMs: 1_000 })), false);
      const leased = (await a.lease(500)).flatMap((d) => d.tasks.map((t) => ({ taskId: t.id, leaseId: d.leaseId, outcome: "success" as const })));
      await a.settle(leased);
    }
    expect(await expectExact()).toEqual({ "a/completed": n });
    const commitsBefore = node.dataDir.db.commits;
    clock.advance(JANITOR_INTERVAL_MS);
    expect(await node.janitor.settled()).toBe(n);
    expect(await expectExact()).toEqual({});
    // At most JANITOR_CHUNK_MAX_ROWS per transaction, and the first chunk is the smallest.
    expect(node.dataDir.db.commits - commitsBefore).toBeGreaterThanOrEqual(2);
    // The next run finds nothing and the timer keeps running.
    clock.advance(JANITOR_INTERVAL_MS);
    expect(await node.janitor.settled()).toBe(0);
  });
});
