/**
 * Replaying the change records reproduces the owner's rows: a real workload runs through
 * real grains (GrainHost, QueueGrain, TaskStore) on a real SQLite file and a fake clock;
 * every turn's effects are taken where the node will take them (`GrainHooks.onApplied`,
 * after the store applied them), encoded as records, decoded, and applied in order to a
 * second, empty database through the same store code. After every turn, every row of
 * every table holding queue state must be the owner's, byte for byte (rowids included:
 * activation loads a queue's tasks in rowid order).
 *
 * The workload reaches every effect kind (checked), so an effect that loses a field in
 * the record shows up as a row that differs, named with the turn that wrote it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RECORDED_KINDS, decodeTurn, encodeTurn } from "../../src/changelog/change-record.js";
import { seededRandom } from "../../src/base/random.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import type { LeasedDelivery, QueueGrain } from "../../src/grains/queue/queue-grain.js";
import type { ScheduleSpec } from "../../src/grains/queue/schedule.js";
import type { NewTask } from "../../src/grains/queue/task.js";
import type { Outcome } from "../../src/grains/queue/task.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { cronCalendar } from "../../src/server/cron-calendar.js";
import type { Database } from "../../src/storage/database.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

const DEAD_RETENTION_MS = 7 * 86_400_000;
/**
 * Tables of queue state (what a record must reproduce) and the order their rows are
 * compared in: rowid (compared too) where a table has one, else its primary key.
 */
const QUEUE_TABLES: Record<string, string> = {
  tasks: "rowid", attempts: "task_id, number", queues: "rowid", group_configs: "rowid", slot_limits: "rowid", schedules: "rowid",
  queue_counts: "queue, state",
};
/** Tables of the node, not of a queue (the records do not write them). */
const NODE_TABLES = ["schema_migrations", "task_type_rules", "partition_log"];

interface Turn {
  record: Uint8Array;
  kinds: Effect["kind"][];
  /** The owner's rows right after the turn was applied. */
  rows: Rows;
}
type Rows = Record<string, unknown[]>;

let dirs: string[];
let owner: DataDir;
let replica: DataDir;
let clock: FakeClock;
let host: GrainHost;
let turns: Turn[];

function open(): DataDir {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-replay-"));
  dirs.push(dir);
  return openDataDir({ dir, synchronous: "normal" });
}

/** Every row of every queue-state table, in order. */
function rowsOf(db: Database): Rows {
  return Object.fromEntries(Object.entries(QUEUE_TABLES).map(([table, order]) => {
    const columns = order === "rowid" ? `rowid AS "(rowid)", *` : "*";
    return [table, db.sqlite.prepare(`SELECT ${columns} FROM ${table} ORDER BY ${order}`).all()];
  }));
}

beforeEach(() => {
  dirs = [];
  owner = open();
  replica = open();
  clock = new FakeClock(Date.UTC(2026, 5, 1, 12));
  turns = [];
  const store = new TaskStore(owner.db, { deadRetentionMs: DEAD_RETENTION_MS });
  host = new GrainHost({
    store, clock, random: seededRandom(7), newId: leaseIdCounter(), core: coreConfig(), idleMs: 3_600_000, cron: cronCalendar,
    logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(),
    hooks: {
      onEvents: () => {},
      // What the node will append at commit: the turn's effects, as the store applied them.
      onApplied: (queue, effects) => turns.push({ record: encodeTurn(queue, effects), kinds: effects.map((e) => e.kind), rows: rowsOf(owner.db) }),
    },
  });
  host.start();
});

afterEach(() => {
  host.stop();
  owner.close();
  replica.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const W = "work";
const enqueue = (grain: QueueGrain, tasks: NewTask[]) => {
  for (const outcome of grain.enqueue(tasks, false)) if (!outcome.ok) throw outcome.error;
};
const deliveryOf = (deliveries: readonly LeasedDelivery[], taskId: string) => {
  const d = deliveries.find((x) => x.taskIds.includes(taskId));
  if (!d) throw new Error(`${taskId} was not delivered (delivered: ${deliveries.flatMap((x) => x.taskIds).join(", ")})`);
  return d;
};
const settle = (grain: QueueGrain, deliveries: readonly LeasedDelivery[], taskId: string, outcome: Outcome, extra: { result?: Uint8Array; error?: string } = {}) => {
  const [error] = grain.settle([{ leaseId: deliveryOf(deliveries, taskId).leaseId, taskId, outcome, ...extra }]);
  expect(error, `settle ${taskId} ${outcome}`).toBeNull();
};
const act = (grain: QueueGrain, id: string, action: Parameters<QueueGrain["act"]>[1]) => expect(grain.act(id, action), `${action} ${id}`).toBeNull();

function scheduleSpec(name: string, cadence: ScheduleSpec["cadence"]): ScheduleSpec {
  const { id: _i, idChosen: _c, processAtMs: _p, expiresAtMs: _e, deadlineAtMs: _d, uniqueKey: _u, uniqueTtlMs: _t, ...task } = newTask({
    queue: W, type: "report", metadata: { zone: "eu", account: "a-1" },
    rules: [{ ruleId: "report#0", key: "eu", maxRuns: 4, strategy: "GROUP_ROUND_ROBIN" }],
  });
  return { name, task: { ...task, processInMs: 250, expiresInMs: 600_000 }, cadence, missed: "latest", skipIfRunning: false };
}

/** Every kind of effect, through the grains' own operations. */
function workload(): void {
  const now = () => clock.nowMs();
  const work = host.get(W);
  work.setKeyLimit(2);
  work.setRateLimit({ ratePerSec: 500, burst: 50 });
  work.setGroupConfig("batch", { maxSize: 3, maxDelayMs: 60_000, graceMs: 10_000 });

  const t = {
    done: newTask({ queue: W, concurrencyKey: "k1", metadata: { b: "2", a: "1", tier: "gold" }, payload: new Uint8Array([9, 8, 7, 6]) }),
    retried: newTask({ queue: W, concurrencyKey: "k1", uniqueKey: "u-1" }),
    failed: newTask({ queue: W, concurrencyKey: "k2", uniqueKey: "u-2", uniqueTtlMs: 30_000 }),
    later: newTask({ queue: W, processAtMs: now() + 5_000 }),
    keyed: newTask({ queue: W, type: "email:send", rules: [{ ruleId: "email:send#0", key: "user-1", maxRuns: 1, strategy: "GROUP_ROUND_ROBIN" }] }),
    shared: newTask({ queue: W, rules: [{ ruleId: "@accounts", key: "acct-9", maxRuns: 3, strategy: "GROUP_ROUND_ROBIN" }] }),
    chosen: newTask({ queue: W, id: "chosen-1", idChosen: true, expiresAtMs: now() + 3_600_000 }),
    refused: newTask({ queue: W, ruleError: "email:send rule 0: key expression failed" }),
    timed: newTask({ queue: W, timeoutMs: 200, deadlineAtMs: now() + 3_600_000 }),
  };
  enqueue(work, Object.values(t));
  // A group filled to its override's size fires in the turn of its last member.
  enqueue(work, [1, 2, 3].map(() => newTask({ queue: W, type: "digest", group: "batch" })));
  // CANCEL_NEWEST at limit 1: the second task of the key is cancelled as it arrives.
  const newest = { ruleId: "sync#0", key: "doc-1", maxRuns: 1, strategy: "CANCEL_NEWEST" } as const;
  enqueue(work, [newTask({ queue: W, type: "sync", rules: [newest] }), newTask({ queue: W, type: "sync", rules: [newest] })]);

  const first = work.lease(30, { batchTypes: new Set(["digest"]) }, Infinity, "worker-1");
  settle(work, first, t.done.id, "success", { result: new Uint8Array([1, 2]) });
  settle(work, first, t.retried.id, "retry", { error: "boom" });
  settle(work, first, t.failed.id, "skip_retry", { error: "fatal" });
  settle(work, first, t.keyed.id, "released");
  const batch = first.find((d) => d.batch)!;
  expect(work.settle(batch.taskIds.map((taskId) => ({ leaseId: batch.leaseId, taskId, outcome: "success" as const })))).toEqual([null, null, null]);
  // The limit stays on while the clock moves: with a token and dispatchable work nobody
  // leases, the grain used to re-arm its timer at the same instant after every tick, and
  // the fake clock fired it forever (TokenBucket.nextTokenAtMs now says "no wait").
  clock.advance(2_000);
  work.setRateLimit(undefined);
  // t.shared's lease lapses (no heartbeat); t.timed's attempt times out; t.retried's backoff ends.
  clock.advance(2_000);

  act(work, t.later.id, "run");
  act(work, t.failed.id, "retry");
  const [cancelled, archived, deleted] = [newTask({ queue: W }), newTask({ queue: W }), newTask({ queue: W })];
  enqueue(work, [cancelled, archived, deleted]);
  act(work, cancelled.id, "cancel");
  act(work, archived.id, "archive");
  act(work, deleted.id, "delete");
  act(work, t.done.id, "delete");
  work.setPaused(true);
  work.setPaused(false);
  work.setGroupConfig("batch", undefined);
  work.setKeyLimit(undefined);

  // The released keyed task runs again and finishes: its rule key's limit is forgotten.
  const second = work.lease(30, { batchTypes: new Set() }, Infinity, "worker-2");
  settle(work, second, t.keyed.id, "success");

  work.schedule({ kind: "set", spec: scheduleSpec("every-second", { kind: "interval", everyMs: 1_000, anchorMs: now() }) });
  work.schedule({ kind: "set", spec: scheduleSpec("hourly", { kind: "cron", expression: "0 * * * *", timeZone: "Europe/Berlin" }) });
  clock.advance(3_000);
  work.schedule({ kind: "pause", name: "every-second" });
  work.schedule({ kind: "runNow", name: "every-second" });
  work.schedule({ kind: "delete", name: "every-second" });
  clock.advance(3_600_000);

  // A queue removed: its finished task deleted, then its settings in one last turn.
  const temp = host.get("temp");
  temp.setKeyLimit(5);
  const only = newTask({ queue: "temp" });
  enqueue(temp, [only]);
  settle(temp, temp.lease(1, { batchTypes: new Set() }, Infinity, "worker-3"), only.id, "success");
  act(temp, only.id, "delete");
  temp.removeSettings();
  host.retire("temp");
}

describe("replaying change records", () => {
  it("reproduces every row of the owner's queue state, after every turn", async () => {
    workload();
    await owner.db.committed();

    const store = new TaskStore(replica.db, { deadRetentionMs: DEAD_RETENTION_MS });
    for (const [i, turn] of turns.entries()) {
      const { queue, effects } = decodeTurn(turn.record);
      store.apply(queue, effects);
      expect(rowsOf(replica.db), `rows after turn ${i} of ${queue} (${turn.kinds.join(", ")})`).toEqual(turn.rows);
    }
    await replica.db.committed();
    expect(rowsOf(replica.db)).toEqual(rowsOf(owner.db));

    // Not vacuous: every kind of effect was replayed, and the tables hold rows.
    expect(new Set(turns.flatMap((t) => t.kinds))).toEqual(new Set(RECORDED_KINDS));
    const final = rowsOf(owner.db);
    expect(final["tasks"]!.length).toBeGreaterThanOrEqual(20);
    expect(final["attempts"]!.length).toBeGreaterThan(5);
    expect(final["schedules"]).toHaveLength(1);
  });

  it("compares every table the records write (a new table of queue state must be added here)", () => {
    const tables = owner.db.sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").pluck().all() as string[];
    expect(tables.sort()).toEqual([...Object.keys(QUEUE_TABLES), ...NODE_TABLES].sort());
  });
});
