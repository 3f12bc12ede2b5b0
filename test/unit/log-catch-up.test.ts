/**
 * A claim's catch-up (server/log-catch-up.ts) on real SQLite files and the in-memory
 * changelog: an owner runs real grains, each committed turn is appended to its
 * partition's log as the node does (one record per turn), and a second node's rows are
 * brought to the log with LogCatchUp. Its rows of the partition must then be the owner's,
 * wherever it started: with no rows, at a recorded position, with stale rows of its own.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { encodeTurn } from "../../src/changelog/change-record.js";
import { MemoryChangeLog } from "../../src/changelog/memory-change-log.js";
import { seededRandom } from "../../src/base/random.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import type { LeasedDelivery } from "../../src/grains/queue/queue-grain.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { cronCalendar } from "../../src/server/cron-calendar.js";
import { LogCatchUp } from "../../src/server/log-catch-up.js";
import type { Database } from "../../src/storage/database.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { LogPositions } from "../../src/storage/log-positions.js";
import { PartitionRows } from "../../src/storage/partition-rows.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

/** Queues "a…" are partition 0, the rest partition 1. */
const partitionOf = (queue: string) => (queue.startsWith("a") ? 0 : 1);
const P = 0;
/** Tables of queue state, compared in this order. */
const TABLES: Record<string, string> = {
  tasks: "rowid", attempts: "task_id, number", queues: "name", group_configs: "rowid", slot_limits: "rowid", schedules: "rowid", queue_counts: "queue, state",
};

let dirs: string[];
let owner: DataDir;
let replica: DataDir;
let host: GrainHost;
let log: MemoryChangeLog;
/** Turns committed on the owner and not yet appended, per partition. */
let pendingTurns: Map<number, Uint8Array[]>;

function open(): DataDir {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-catch-up-"));
  dirs.push(dir);
  return openDataDir({ dir, synchronous: "normal" });
}

/** The rows of partition p's queues, table by table, in a stable order. */
function rowsOf(db: Database, p: number): Record<string, unknown[]> {
  return Object.fromEntries(Object.entries(TABLES).map(([table, order]) => {
    const queueColumn = table === "queues" ? "name" : table === "slot_limits" ? "scope" : table === "attempts" ? "(SELECT queue FROM tasks WHERE id = task_id)" : "queue";
    const rows = db.sqlite.prepare(`SELECT * FROM ${table} ORDER BY ${order}`).all() as Array<Record<string, unknown>>;
    const ofP = db.sqlite.prepare(`SELECT ${queueColumn} AS q FROM ${table} ORDER BY ${order}`).pluck().all() as string[];
    return [table, rows.filter((_, i) => ofP[i] !== null && ofP[i] !== "" && partitionOf(ofP[i]!) === p)];
  }));
}

/** Appends the owner's committed turns of partition p as one entry each, after the last. */
async function appendTurns(p: number): Promise<number> {
  await owner.db.committed();
  let last = await log.lastSeq(p);
  for (const record of pendingTurns.get(p) ?? []) {
    const outcome = await log.append(p, [record], last);
    if (outcome.kind !== "ok") throw new Error(`append: ${outcome.kind}`);
    last = outcome.seq;
  }
  pendingTurns.set(p, []);
  return last;
}

function catchUpOn(dataDir: DataDir): { catchUp: LogCatchUp; positions: LogPositions; store: TaskStore } {
  const store = new TaskStore(dataDir.db, { deadRetentionMs: 86_400_000 });
  const positions = new LogPositions(dataDir.db);
  const catchUp = new LogCatchUp({ log, db: dataDir.db, store, rows: new PartitionRows(dataDir.db), positions, partitionOf, logger: pino({ level: "silent" }) });
  return { catchUp, positions, store };
}

/** Enqueues `n` tasks into `queue`, one turn each, then leases and completes half of them. */
function work(queue: string, n: number): void {
  const grain = host.get(queue);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const task = newTask({ queue, concurrencyKey: `k${i % 3}` });
    for (const outcome of grain.enqueue([task], false)) if (!outcome.ok) throw outcome.error;
    ids.push(task.id);
  }
  const deliveries: readonly LeasedDelivery[] = grain.lease(Math.floor(n / 2), { batchTypes: new Set() }, Infinity, "w1");
  for (const d of deliveries.slice(0, Math.floor(deliveries.length / 2))) {
    for (const id of d.taskIds) grain.settle([{ leaseId: d.leaseId, taskId: id, outcome: "success" }]);
  }
}

/** Real grains on `store`, calling `onApplied` after each turn. */
function grainsOn(store: TaskStore, onApplied: (queue: string, effects: readonly Effect[]) => void = () => {}): GrainHost {
  const grains = new GrainHost({
    store, clock: new FakeClock(Date.UTC(2026, 5, 1, 12)), random: seededRandom(3), newId: leaseIdCounter(), core: coreConfig(), idleMs: 3_600_000,
    cron: cronCalendar, logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(),
    hooks: { onEvents: () => {}, onApplied },
  });
  grains.start();
  return grains;
}

beforeEach(async () => {
  dirs = [];
  owner = open();
  replica = open();
  log = new MemoryChangeLog();
  pendingTurns = new Map();
  host = grainsOn(new TaskStore(owner.db, { deadRetentionMs: 86_400_000 }), (queue, effects) => {
    const p = partitionOf(queue);
    pendingTurns.set(p, [...(pendingTurns.get(p) ?? []), encodeTurn(queue, effects)]);
  });
  // The owner's claim: a fence first, as on the real log.
  await log.appendFence(P, new TextEncoder().encode("owner"), 0);
});

afterEach(() => {
  host.stop();
  owner.close();
  replica.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("catching up with a partition's changelog before a claim", () => {
  it("rebuilds a partition from the log on a node with none of its rows, across pages, and records where it stands", async () => {
    work("a-one", 300);
    work("a-two", 20);
    const last = await appendTurns(P);
    const { catchUp, positions } = catchUpOn(replica);
    const result = await catchUp.to(P, last);
    await replica.db.committed();
    expect(result.rebuilt).toBe(true);
    expect(result.entries).toBeGreaterThan(256);
    expect(rowsOf(replica.db, P)).toEqual(rowsOf(owner.db, P));
    expect(rowsOf(replica.db, P)["tasks"]).toHaveLength(320);
    expect(positions.get(P)).toBe(last);
  });

  it("from a recorded position applies only what follows it", async () => {
    work("a-one", 30);
    const middle = await appendTurns(P);
    const { catchUp, positions } = catchUpOn(replica);
    await catchUp.to(P, middle);
    work("a-one", 10);
    const last = await appendTurns(P);
    const entriesAfter = (await log.read(P, middle + 1, 1_000)).length;
    const result = await catchUp.to(P, last);
    await replica.db.committed();
    expect(result).toMatchObject({ rebuilt: false, entries: entriesAfter });
    expect(rowsOf(replica.db, P)).toEqual(rowsOf(owner.db, P));
    expect(positions.get(P)).toBe(last);
  });

  it("drops stale rows of the partition with no position (a crashed owner's), keeps other partitions' rows", async () => {
    const { catchUp, store } = catchUpOn(replica);
    // Stale rows of this partition on the replica (a queue the owner never had, and one it
    // has, written by grains of the replica's own), and rows of another partition, which must stay.
    const own = grainsOn(store);
    for (const queue of ["a-gone", "a-one", "b-other"]) {
      for (const outcome of own.get(queue).enqueue([newTask({ queue }), newTask({ queue })], false)) if (!outcome.ok) throw outcome.error;
    }
    own.stop();
    await replica.db.committed();
    const otherBefore = rowsOf(replica.db, 1);
    expect(otherBefore["tasks"]).toHaveLength(2);
    work("a-one", 12);
    const last = await appendTurns(P);
    const result = await catchUp.to(P, last);
    await replica.db.committed();
    expect(result.rebuilt).toBe(true);
    expect(rowsOf(replica.db, P)).toEqual(rowsOf(owner.db, P));
    expect(rowsOf(replica.db, 1)).toEqual(otherBefore);
  });

  it("drops the grains of the partition still in memory here (it held the partition before), so their queues come back from the caught-up rows", async () => {
    const { catchUp, store } = catchUpOn(replica);
    // The replica's own grains, wired as the node wires them (node.ts): rows replaced outside the grains end their memory.
    const own = grainsOn(store);
    store.onForget((queues) => queues.forEach((q) => own.deactivate(q, "replaced")));
    // It served "a-one" once (a task the log never acknowledged, leased here), and still has that grain in memory.
    for (const outcome of own.get("a-one").enqueue([newTask({ queue: "a-one", id: "never-acknowledged" })], false)) if (!outcome.ok) throw outcome.error;
    own.get("a-one").lease(1, { batchTypes: new Set() }, Infinity, "w2");
    await replica.db.committed();
    const onOwner = (state: string) => (owner.db.sqlite.prepare("SELECT id FROM tasks WHERE queue = 'a-one' AND state = ? ORDER BY id").pluck().all(state) as string[]);
    const inMemory = (state: "pending" | "active") => own.get("a-one").idsInState(state).sort();

    // A rebuild (no position): the grain goes with the rows it was built on.
    work("a-one", 12);
    await catchUp.to(P, await appendTurns(P));
    await replica.db.committed();
    expect(own.peek("a-one"), "the grain built on the dropped rows").toBeUndefined();
    expect(inMemory("pending")).toEqual(onOwner("pending"));
    expect(inMemory("active")).toEqual(onOwner("active"));

    // From a position: the grain in memory goes before the first page is applied.
    work("a-one", 6);
    await catchUp.to(P, await appendTurns(P));
    await replica.db.committed();
    expect(own.peek("a-one"), "the grain built on the rows before the catch-up").toBeUndefined();
    expect(inMemory("pending")).toEqual(onOwner("pending"));
    expect(inMemory("active")).toEqual(onOwner("active"));
    expect(onOwner("pending").length).toBeGreaterThan(0);
    expect(onOwner("active").length).toBeGreaterThan(0);
    own.stop();
  });

  it("an empty log keeps the rows here as they are (written before the cluster had a log)", async () => {
    const { catchUp, positions } = catchUpOn(replica);
    const empty = 7;
    const result = await catchUp.to(empty, 0);
    expect(result).toMatchObject({ entries: 0, rebuilt: false });
    expect(positions.get(empty)).toBeUndefined();
  });

  it("stops at a record this build cannot apply, keeping the last whole page and its position", async () => {
    work("a-one", 5);
    const good = await appendTurns(P);
    const { catchUp, positions } = catchUpOn(replica);
    await catchUp.to(P, good);
    await replica.db.committed();
    const rowsAtGood = rowsOf(replica.db, P);
    work("a-one", 3);
    await appendTurns(P);
    const bad = await log.append(P, [new Uint8Array([0xff, 0xff, 0xff])], await log.lastSeq(P));
    if (bad.kind !== "ok") throw new Error("append");
    await expect(catchUp.to(P, bad.seq)).rejects.toThrow(/not a change record/);
    await replica.db.committed();
    expect(positions.get(P)).toBe(good);
    expect(rowsOf(replica.db, P)).toEqual(rowsAtGood);
  });
});
