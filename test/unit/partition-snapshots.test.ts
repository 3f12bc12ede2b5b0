/**
 * Partition snapshots (server/partition-snapshots.ts) taken while the owner keeps writing:
 * real grains on a real SQLite file, the real TurnJournal on the in-memory changelog
 * (wired to the group commit as the node wires it), appends held now and then so that
 * turns wait and fly while a snapshot is read. Every snapshot stored must be exactly the
 * log up to its sequence: its rows plus the log's later entries give the owner's rows.
 * The log is purged below the previous snapshot, and a node with no rows rebuilds from
 * the latest snapshot plus the entries after it; a standby left behind a purge sees the gap.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { encodeTurn } from "../../src/changelog/change-record.js";
import { MemoryChangeLog } from "../../src/changelog/memory-change-log.js";
import { MemorySnapshotStore } from "../../src/changelog/memory-snapshot-store.js";
import { TurnJournal } from "../../src/changelog/turn-journal.js";
import { seededRandom } from "../../src/base/random.js";
import type { QueueGrain } from "../../src/grains/queue/queue-grain.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { cronCalendar } from "../../src/server/cron-calendar.js";
import { LogCatchUp, LogGap } from "../../src/server/log-catch-up.js";
import { PartitionSnapshots } from "../../src/server/partition-snapshots.js";
import type { Database } from "../../src/storage/database.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { LogPositions } from "../../src/storage/log-positions.js";
import { PartitionRows } from "../../src/storage/partition-rows.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

const P = 0;
const partitionOf = () => P;
const silent = pino({ level: "silent" });

let dirs: string[];
let owner: DataDir;
let host: GrainHost;
let log: MemoryChangeLog;
let store: MemorySnapshotStore;
let journal: TurnJournal;
let snapshots: PartitionSnapshots;
/** Every snapshot stored, with its bytes (the store keeps only the newest). */
let stored: Array<{ seq: number; bytes: Uint8Array }>;

function open(): DataDir {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-snapshots-"));
  dirs.push(dir);
  return openDataDir({ dir, synchronous: "normal" });
}

/**
 * Every queue-state row, rowids left out (a rebuilt file numbers them in its own order).
 * Counts of 0 are left out too: the triggers keep a state's row once it has been counted,
 * and a snapshot does not copy the counts (the load's inserts make them), so a state that
 * went back to 0 before the snapshot has a row on the owner only. Readers treat both alike.
 */
function rowsOf(db: Database): Record<string, unknown[]> {
  const tables: Record<string, string> = { tasks: "id", attempts: "task_id, number", queues: "name", "queue_counts WHERE n > 0": "queue, state" };
  return Object.fromEntries(Object.entries(tables).map(([t, order]) => [t, db.sqlite.prepare(`SELECT * FROM ${t} ORDER BY ${order}`).all()]));
}

function catchUpOn(dataDir: DataDir) {
  const positions = new LogPositions(dataDir.db);
  const catchUp = new LogCatchUp({
    log, db: dataDir.db, store: new TaskStore(dataDir.db, { deadRetentionMs: 86_400_000 }), rows: new PartitionRows(dataDir.db), positions,
    snapshots: store, partitionOf, logger: silent,
  });
  return { catchUp, positions };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Turns of every kind that matters here, spread over event-loop turns so commits and appends interleave. */
async function workload(rounds: number): Promise<void> {
  const grains: QueueGrain[] = [host.get("a"), host.get("b")];
  for (let i = 0; i < rounds; i++) {
    const grain = grains[i % 2]!;
    for (const outcome of grain.enqueue([newTask({ queue: i % 2 ? "b" : "a", concurrencyKey: `k${i % 4}` })], false)) if (!outcome.ok) throw outcome.error;
    if (i % 3 === 0) {
      for (const d of grain.lease(2, { batchTypes: new Set() }, Infinity, "w")) {
        for (const id of d.taskIds) grain.settle([{ leaseId: d.leaseId, taskId: id, outcome: "success" }]);
      }
    }
    // Now and then the log is slow: turns wait behind an append in flight while a snapshot may be read.
    if (i % 17 === 0) {
      // An append in flight and turns waiting behind it when a snapshot is read; more turns
      // arrive after the seal, and must not go in the sealed entry.
      const release = log.holdAppends();
      for (const outcome of grain.enqueue([newTask({ queue: i % 2 ? "b" : "a" })], false)) if (!outcome.ok) throw outcome.error;
      await tick();
      for (const outcome of grain.enqueue([newTask({ queue: i % 2 ? "b" : "a" })], false)) if (!outcome.ok) throw outcome.error;
      await tick();
      void snapshots.take(P);
      for (const outcome of grain.enqueue([newTask({ queue: i % 2 ? "b" : "a" })], false)) if (!outcome.ok) throw outcome.error;
      await tick();
      release();
    }
    await tick();
  }
}

beforeEach(async () => {
  dirs = [];
  owner = open();
  log = new MemoryChangeLog();
  store = new MemorySnapshotStore();
  stored = [];
  const put = store.put.bind(store);
  store.put = async (p, seq, bytes) => {
    await put(p, seq, bytes);
    stored.push({ seq, bytes: bytes.slice() });
  };
  journal = new TurnJournal({ log, nodeId: "n1", partitionOf, now: () => Date.now(), events: { appended: (p) => snapshots.appended(p, 1) } });
  owner.db.onCommit(() => journal.committed());
  owner.db.onRollback(() => journal.rolledBack());
  owner.db.onUndo((writeId) => journal.undone(writeId));
  await journal.openPartition(P, 1, new TextEncoder().encode("n1"));
  snapshots = new PartitionSnapshots({ journal, rows: new PartitionRows(owner.db), store, log, partitionOf, every: 25, logger: silent });
  host = new GrainHost({
    store: new TaskStore(owner.db, { deadRetentionMs: 86_400_000 }), clock: new FakeClock(Date.UTC(2026, 5, 1, 12)), random: seededRandom(9),
    newId: leaseIdCounter(), core: coreConfig(), idleMs: 3_600_000, cron: cronCalendar, logger: silent, sharedSlots: new SharedSlotLedger(),
    hooks: { onEvents: () => {}, onApplied: (queue, effects) => journal.record(queue, encodeTurn(queue, effects), owner.db.writeId) },
  });
  host.start();
});

afterEach(() => {
  host.stop();
  owner.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("partition snapshots taken while the owner writes", () => {
  it("each is exactly the log up to its sequence; the log is purged below the previous one; a node without rows rebuilds from the latest", async () => {
    await workload(220);
    await owner.db.committed();
    await journal.flushed(P);
    expect(stored.length, "snapshots taken").toBeGreaterThanOrEqual(4);
    const entries = await log.read(P, 1, 10_000);
    const ownerRows = rowsOf(owner.db);

    // Every snapshot plus the entries after it (those still on the log) gives the owner's rows.
    const kept = stored.filter((s) => s.seq >= entries[0]!.seq - 1 || entries.some((e) => e.prevSeq === s.seq));
    expect(kept.length).toBeGreaterThanOrEqual(1);
    for (const snap of kept) {
      const replica = open();
      try {
        const positions = new LogPositions(replica.db);
        new PartitionRows(replica.db).load(Buffer.from(snap.bytes), [], () => positions.set(P, snap.seq));
        const { catchUp } = catchUpOn(replica);
        await catchUp.to(P, await log.lastSeq(P));
        await replica.db.committed();
        expect(rowsOf(replica.db), `snapshot at ${snap.seq} + the log after it`).toEqual(ownerRows);
      } finally {
        replica.close();
      }
    }

    // Purged below the previous snapshot: the log's first entry is at or after it.
    const previous = stored.at(-2)!.seq;
    expect(entries[0]!.seq).toBeGreaterThanOrEqual(previous);
    expect(entries[0]!.seq).toBeGreaterThan(1);

    // A node with no rows: the latest snapshot, then the entries after it.
    const cold = open();
    try {
      const { catchUp, positions } = catchUpOn(cold);
      const result = await catchUp.to(P, await log.lastSeq(P));
      await cold.db.committed();
      expect(result.rebuilt).toBe(true);
      expect(rowsOf(cold.db)).toEqual(ownerRows);
      expect(positions.get(P)).toBe(await log.lastSeq(P));
    } finally {
      cold.close();
    }
  });

  it("a standby whose position fell below a purge sees the gap, and starts again from the snapshot", async () => {
    const standby = open();
    try {
      const { catchUp, positions } = catchUpOn(standby);
      await workload(10);
      await journal.flushed(P);
      await catchUp.to(P, await log.lastSeq(P));
      const at = positions.get(P)!;
      await workload(120);
      await journal.flushed(P);
      expect(stored.length).toBeGreaterThanOrEqual(2);
      const next = (await log.read(P, at + 1, 1))[0]!;
      expect(next.prevSeq, "the entries right after the standby's position were purged").not.toBe(at);
      expect(() => catchUp.applyFollowed(P, next)).toThrow(LogGap);
      expect(positions.get(P), "the gap clears the position").toBeUndefined();
      // Starting again: from the latest snapshot, then the log.
      const from = await catchUp.standbyFrom(P);
      expect(from).toBe(stored.at(-1)!.seq);
      await catchUp.to(P, await log.lastSeq(P));
      await standby.db.committed();
      await owner.db.committed();
      expect(rowsOf(standby.db)).toEqual(rowsOf(owner.db));
    } finally {
      standby.close();
    }
  });
});
