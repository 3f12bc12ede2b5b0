/**
 * Bulk actions at the owner (grains/runtime/bulk-runner.ts) on a real SQLite file and a
 * fake clock: batches are separate grain turns, so a call made while the bulk action is
 * in progress is served between two batches, and a task that moved on meanwhile is
 * skipped and not counted.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BULK_ACTION_BATCH_MAX_TASKS } from "../../src/base/limits.js";
import { seededRandom } from "../../src/base/random.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { LocalQueueRef } from "../../src/grains/runtime/queue-ref.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { AdminQueries } from "../../src/storage/admin-queries.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

let dir: string;
let dataDir: DataDir;
let host: GrainHost;
let store: TaskStore;
let queries: AdminQueries;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-bulk-"));
  dataDir = openDataDir({ dir, synchronous: "normal" });
  store = new TaskStore(dataDir.db, { deadRetentionMs: 86_400_000 });
  queries = new AdminQueries(dataDir.db);
  host = new GrainHost({
    store, clock: new FakeClock(), random: seededRandom(7), newId: leaseIdCounter(), core: coreConfig(), idleMs: 60_000,
    logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(), hooks: { onEvents: () => {} },
  });
});

afterEach(() => {
  host.stop();
  dataDir.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("bulk runner", () => {
  it("serves a lease between two batches; the leased task is skipped by the later batch and not counted", async () => {
    const n = BULK_ACTION_BATCH_MAX_TASKS * 2 + 10;
    const tasks = Array.from({ length: n }, () => newTask({ queue: "q" }));
    for (const o of host.get("q").enqueue(tasks, false)) if (!o.ok) throw o.error;
    const ref = new LocalQueueRef("q", host, store);

    const bulk = ref.bulkAct("archive", "pending");
    // The first batch ran in the call's turn; this lease runs before the second batch.
    const leased = host.get("q").lease(1);
    expect(leased.map((d) => d.tasks[0]!.id)).toEqual([tasks[BULK_ACTION_BATCH_MAX_TASKS]!.id]);

    expect(await bulk).toBe(n - 1);
    expect(queries.queueSummary("q").counts).toMatchObject({ archived: n - 1, active: 1, pending: 0 });
  });

  it("removes a queue only after its last unfinished task is gone, deleting the finished ones in batches", async () => {
    const tasks = Array.from({ length: BULK_ACTION_BATCH_MAX_TASKS + 3 }, () => newTask({ queue: "q" }));
    for (const o of host.get("q").enqueue(tasks, false)) if (!o.ok) throw o.error;
    host.get("q").setKeyLimit(2);
    const ref = new LocalQueueRef("q", host, store);
    await expect(ref.remove()).rejects.toMatchObject({ reason: "QUEUE_HAS_UNFINISHED_TASKS" });
    expect(await ref.bulkAct("cancel", "pending")).toBe(tasks.length);
    expect(await ref.remove()).toBe(tasks.length);
    expect(store.queueExists("q")).toBe(false);
    expect(host.activeQueues()).not.toContain("q");
    expect(queries.queueSettings()).toEqual([]);
  });
});
