/**
 * Activation's read of a queue's unfinished rows (storage/unfinished-rows.ts: plain
 * pending rows with only their columns, every other row with all of them, the two
 * statements merged by rowid) returns exactly what one statement over every column
 * returns, in the same order: checked on a real SQLite file after a workload that leaves
 * every kind of row (plain pending ones, some with a deadline, an expiry, a unique key,
 * failures and attempts behind them; released ones with a stale attempt, active,
 * scheduled, retry, aggregating, fired batch members, rule members), then through a core
 * loaded from it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { QueueCore } from "../../src/grains/queue/queue-core.js";
import { indexEntry, type TaskIndexEntry } from "../../src/grains/queue/task.js";
import type { TaskRule } from "../../src/grains/queue/rules.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { seededRandom } from "../../src/base/random.js";
import { LEASE_TTL_MS, QUEUE, coreConfig, leaseIdCounter, newTask } from "../support/core-fixtures.js";

let dir: string;
let dataDir: DataDir;
let store: TaskStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-unfinished-"));
  dataDir = openDataDir({ dir, synchronous: "normal" });
  store = new TaskStore(dataDir.db, { deadRetentionMs: 1_000 });
});

afterEach(() => {
  dataDir.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The read activation made before: one statement, every column, named, sorted by rowid. */
function readAsBefore(queue: string): TaskIndexEntry[] {
  type R = Record<string, string | number | null> & { state: TaskIndexEntry["state"] };
  const rows = dataDir.db.sqlite.prepare(`SELECT id, state, type, priority, seq, concurrency_key, ready_at, timeout_ms, deadline_at,
    expires_at, unique_key, unique_until, retried, max_retry, backoff_base_ms, backoff_max_ms, lease_id, lease_expires_at,
    attempt_ends_at, attempt_started_at, attempt_worker, attempt_number, grp, batch_id, rules, length(payload) AS payload_bytes
    FROM tasks WHERE queue = ? AND state IN ('pending','scheduled','retry','active','aggregating') ORDER BY rowid`).all(queue) as R[];
  const str = (v: unknown) => v as string;
  const num = (v: unknown) => v as number;
  return rows.map((r) => indexEntry({
    id: str(r.id), type: str(r.type), priority: num(r.priority), concurrencyKey: str(r.concurrency_key), timeoutMs: num(r.timeout_ms),
    deadlineAtMs: num(r.deadline_at), uniqueKey: str(r.unique_key), maxRetry: num(r.max_retry), backoffBaseMs: num(r.backoff_base_ms),
    backoffMaxMs: num(r.backoff_max_ms), group: str(r.grp), rules: JSON.parse(str(r.rules)) as TaskRule[],
  }, {
    state: r.state, seq: num(r.seq), readyAtMs: num(r.ready_at), expiresAtMs: num(r.expires_at), uniqueUntilMs: num(r.unique_until),
    retried: num(r.retried), leaseId: str(r.lease_id), leaseExpiresAtMs: num(r.lease_expires_at), attemptEndsAtMs: num(r.attempt_ends_at),
    attemptStartedAtMs: num(r.attempt_started_at), attemptWorker: str(r.attempt_worker), attemptNumber: num(r.attempt_number),
    batchId: str(r.batch_id), payloadBytes: num(r.payload_bytes ?? 0),
  }));
}

const rule = (key: string): TaskRule[] => [{ ruleId: "email:send#0", key, maxRuns: 3, strategy: "CANCEL_NEWEST" }];

describe("UnfinishedRows", () => {
  it("reads every kind of unfinished row as one statement of every column did, in rowid order", () => {
    const core = new QueueCore(QUEUE, coreConfig(), { random: seededRandom(3), newId: leaseIdCounter() });
    let now = 1_000_000;
    const turn = (act: () => unknown) => {
      act();
      store.apply(QUEUE, core.drain().effects);
    };
    core.setGroupConfig("g", { maxSize: 2, maxDelayMs: 60_000, graceMs: 60_000 }, now);
    store.apply(QUEUE, core.drain().effects);
    const tasks = [
      newTask({ priority: 2 }), newTask({ deadlineAtMs: now + 50_000 }), newTask({ expiresAtMs: now + 50_000 }),
      newTask({ uniqueKey: "u", uniqueTtlMs: 10_000 }), newTask({ concurrencyKey: "k" }), newTask({ timeoutMs: 5_000, maxRetry: 9 }),
      newTask({ processAtMs: now + 60_000 }), newTask({ group: "g" }), newTask({ group: "g", payload: new Uint8Array(0) }),
      newTask({ group: "g" }), newTask({ rules: rule("r") }), ...Array.from({ length: 20 }, (_, i) => newTask({ priority: 1 + (i % 9) })),
    ];
    turn(() => core.enqueue(tasks, new Map(), now, false));
    const plans = core.lease(6, now, { batchTypes: new Set(["email:send"]) }, Infinity, "w1");
    store.apply(QUEUE, core.drain().effects);
    now += 10;
    // Retry one (a retry row), release one (pending again, its attempt still on the row), leave the rest active.
    turn(() => core.settle([{ leaseId: plans[0]!.leaseId, taskId: plans[0]!.taskIds[0]!, outcome: "retry", error: "e" }], now));
    turn(() => core.settle([{ leaseId: plans[1]!.leaseId, taskId: plans[1]!.taskIds[0]!, outcome: "released" }], now));
    // A plain row with every extra set to a distinct value, so that no two columns can be confused.
    dataDir.db.sqlite.prepare("UPDATE tasks SET retried = 2, attempt_number = 5, unique_until = 7, expires_at = 11 WHERE id = ?").run(tasks[1]!.id);
    const rows = [...store.loadUnfinished(QUEUE)];
    expect(rows.find((e) => e.id === tasks[1]!.id)).toMatchObject({ state: "pending", retried: 2, attemptNumber: 5, uniqueUntilMs: 7, expiresAtMs: 11 });
    const before = readAsBefore(QUEUE);
    expect(new Set(before.map((e) => e.state))).toEqual(new Set(["pending", "active", "retry", "scheduled", "aggregating"]));
    expect(before.some((e) => e.state === "pending" && e.attemptWorker === "w1")).toBe(true); // the released one
    expect(before.some((e) => e.state === "pending" && e.batchId !== "")).toBe(true);
    expect(rows).toEqual(before);

    // A core loaded from the rows holds what the core that wrote them holds, but for the
    // stale attempt of a released task (only the row remembers it) and the leases, which
    // get a full TTL from the load.
    dataDir.db.sqlite.prepare("UPDATE tasks SET retried = 0, attempt_number = 0, unique_until = 0, expires_at = 0 WHERE id = ?").run(tasks[1]!.id);
    const loaded = new QueueCore(QUEUE, coreConfig(), { random: seededRandom(3), newId: leaseIdCounter() });
    loaded.load(store.loadUnfinished(QUEUE), store.loadSettings(QUEUE), now);
    const comparable = (e: TaskIndexEntry) => ({ ...e, attemptStartedAtMs: 0, attemptWorker: "", leaseExpiresAtMs: 0 });
    expect(loaded.snapshot().map(comparable)).toEqual(core.snapshot().map(comparable));
    for (const e of loaded.snapshot()) if (e.state === "active") expect(e.leaseExpiresAtMs).toBe(now + LEASE_TTL_MS);
    expect(loaded.inflightOfKey("k")).toBe(core.inflightOfKey("k"));
    expect(loaded.packedTaskIds().length).toBeGreaterThanOrEqual(15);
  });

  it("reads a backlog larger than a chunk whole and in order, other rows at and across the chunk edges", () => {
    const core = new QueueCore(QUEUE, coreConfig(), { random: seededRandom(5), newId: leaseIdCounter() });
    const now = 1_000_000;
    core.enqueue(Array.from({ length: 12_003 }, (_, i) => newTask({ priority: 1 + (i % 3), ...(i % 1000 === 7 ? { processAtMs: now + 60_000 } : {}) })), new Map(), now, false);
    store.apply(QUEUE, core.drain().effects);
    const sql = dataDir.db.sqlite;
    // Pending rows that are not plain (an attempt remembered, rules, a batch), on either side of the 5,000-row chunk edges.
    for (const rowid of [1, 4_999, 5_000, 5_001, 10_000, 10_001, 12_003]) {
      sql.prepare("UPDATE tasks SET attempt_worker = 'w', attempt_number = 1, attempt_started_at = 5 WHERE rowid = ?").run(rowid);
    }
    sql.prepare(`UPDATE tasks SET rules = ? WHERE rowid = 4_998`).run(JSON.stringify(rule("edge")));
    sql.prepare("UPDATE tasks SET batch_id = 'b1' WHERE rowid = 9_999").run();
    const rows = [...store.loadUnfinished(QUEUE)];
    expect(rows).toHaveLength(12_003);
    expect(rows.filter((e) => e.state === "scheduled")).toHaveLength(12);
    expect(rows.filter((e) => e.attemptWorker === "w")).toHaveLength(7);
    expect(rows.find((e) => e.rules.length > 0)?.rules).toEqual(rule("edge"));
    expect(rows).toEqual(readAsBefore(QUEUE));
  });

  it("stops cleanly when its reader stops early (the statements are not left busy)", () => {
    const core = new QueueCore(QUEUE, coreConfig(), { random: seededRandom(3), newId: leaseIdCounter() });
    core.enqueue([newTask(), newTask({ processAtMs: 2_000_000 }), newTask()], new Map(), 1_000_000, false);
    store.apply(QUEUE, core.drain().effects);
    for (const _ of store.loadUnfinished(QUEUE)) break;
    expect([...store.loadUnfinished(QUEUE)]).toHaveLength(3);
    store.apply(QUEUE, [{ kind: "delete", id: core.snapshot()[0]!.id }]);
  });
});
