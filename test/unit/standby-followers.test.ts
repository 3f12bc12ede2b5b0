/**
 * Warm standbys (server/standby-followers.ts) on real SQLite files and the in-memory
 * changelog: an owner's committed turns are appended to its partition's log as the node
 * does; a second node that the placement names standby follows the log, and its rows of
 * the partition are then the owner's, while a partition it is not a standby of, or holds,
 * is never touched. A claim's pause stops the follower, and the catch-up after it has
 * only the lag left to apply.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { encodeTurn } from "../../src/changelog/change-record.js";
import { MemoryChangeLog } from "../../src/changelog/memory-change-log.js";
import { seededRandom } from "../../src/base/random.js";
import type { Route } from "../../src/cluster/placement.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { cronCalendar } from "../../src/server/cron-calendar.js";
import { LogCatchUp } from "../../src/server/log-catch-up.js";
import { StandbyFollowers, type StandbyPlacement } from "../../src/server/standby-followers.js";
import type { Database } from "../../src/storage/database.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { LogPositions } from "../../src/storage/log-positions.js";
import { PartitionRows } from "../../src/storage/partition-rows.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";
import { eventually } from "../support/node-process.js";

/** Queues "a…" are partition 0, "b…" partition 1. */
const partitionOf = (queue: string) => (queue.startsWith("a") ? 0 : 1);
const silent = pino({ level: process.env.DEBUG_STANDBY ? "debug" : "silent" });

let dirs: string[];
let owner: DataDir;
let standby: DataDir;
let host: GrainHost;
let log: MemoryChangeLog;
let last: Map<number, number>;
let appending: Promise<void>;

function open(): DataDir {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-standby-"));
  dirs.push(dir);
  return openDataDir({ dir, synchronous: "normal" });
}

/** Partition p's tasks in rowid order. Rowids themselves differ (the owner's are shared with other partitions' tasks); their order within a queue, which activation reads in, is the same. */
function tasksOf(db: Database, p: number): unknown[] {
  return (db.sqlite.prepare("SELECT * FROM tasks ORDER BY rowid").all() as Array<{ queue: string }>).filter((r) => partitionOf(r.queue) === p);
}

/** A placement where this node (n2) stands by for the partitions in `standbyOf` and routes the rest as given. */
function placement(standbyOf: Set<number>, routes: Map<number, Route["kind"]> = new Map()): StandbyPlacement {
  return {
    nodeId: "n2", partitions: 2,
    route: (p) => ({ kind: routes.get(p) ?? "remote", p, nodeId: "n1", address: "", epoch: 1 }) as Route,
    standbys: (p) => (standbyOf.has(p) ? ["n2"] : ["n3"]),
  };
}

function standbyParts(dataDir: DataDir) {
  const store = new TaskStore(dataDir.db, { deadRetentionMs: 86_400_000 });
  const positions = new LogPositions(dataDir.db);
  const catchUp = new LogCatchUp({ log, db: dataDir.db, store, rows: new PartitionRows(dataDir.db), positions, partitionOf, logger: silent });
  return { catchUp, positions };
}

function enqueue(queue: string, n: number): void {
  const grain = host.get(queue);
  for (let i = 0; i < n; i++) for (const outcome of grain.enqueue([newTask({ queue })], false)) if (!outcome.ok) throw outcome.error;
}

beforeEach(() => {
  dirs = [];
  owner = open();
  standby = open();
  log = new MemoryChangeLog();
  last = new Map();
  appending = Promise.resolve();
  host = new GrainHost({
    store: new TaskStore(owner.db, { deadRetentionMs: 86_400_000 }), clock: new FakeClock(Date.UTC(2026, 5, 1, 12)), random: seededRandom(5),
    newId: leaseIdCounter(), core: coreConfig(), idleMs: 3_600_000, cron: cronCalendar, logger: silent, sharedSlots: new SharedSlotLedger(),
    hooks: {
      onEvents: () => {},
      // Each turn on its partition's log, in order, as the journal does after the commit.
      onApplied: (queue, effects) => {
        const p = partitionOf(queue);
        const record = encodeTurn(queue, effects);
        appending = appending.then(async () => {
          const outcome = await log.append(p, [record], last.get(p) ?? 0);
          if (outcome.kind !== "ok") throw new Error(`append ${outcome.kind}`);
          last.set(p, outcome.seq);
        });
      },
    },
  });
  host.start();
});

afterEach(() => {
  host.stop();
  owner.close();
  standby.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("warm standbys follow their partitions' changelogs", () => {
  it("keeps the rows of the partitions it stands by for equal to the owner's, and touches no other partition", async () => {
    enqueue("a-q", 20);
    enqueue("b-q", 5);
    await appending;
    const { catchUp, positions } = standbyParts(standby);
    const followers = new StandbyFollowers({ log, catchUp, placement: placement(new Set([0])), count: 1, logger: silent });
    followers.refresh();
    expect(followers.partitions).toBe(1);
    enqueue("a-q", 10);
    await appending;
    await owner.db.committed();
    await eventually("the standby to have every entry", async () => (positions.get(0) === last.get(0) ? true : undefined), 5_000);
    await standby.db.committed();
    expect(tasksOf(standby.db, 0)).toEqual(tasksOf(owner.db, 0));
    expect(tasksOf(standby.db, 0)).toHaveLength(30);
    expect(tasksOf(standby.db, 1)).toEqual([]);
    expect(positions.get(1)).toBeUndefined();
    await followers.stop();
  });

  it("never follows a partition this node holds, claims, hands off or writes the log of; with count 0, none", async () => {
    const { catchUp } = standbyParts(standby);
    for (const kind of ["local", "claim", "moving"] as const) {
      const followers = new StandbyFollowers({ log, catchUp, placement: placement(new Set([0]), new Map([[0, kind]])), count: 1, logger: silent });
      followers.refresh();
      expect(followers.partitions, kind).toBe(0);
    }
    const none = new StandbyFollowers({ log, catchUp, placement: placement(new Set([0, 1])), count: 0, logger: silent });
    none.refresh();
    expect(none.partitions).toBe(0);
    // Nor one whose log this node writes (a claim opening it, or open), whatever the records say.
    const writing = new StandbyFollowers({ log, catchUp, placement: placement(new Set([0, 1])), count: 1, logger: silent, writes: (p) => p === 0 });
    writing.refresh();
    expect(writing.partitions).toBe(1);
    await writing.stop();
  });

  it("a claim's pause stops the follower; the catch-up then applies only the lag; an opened partition refuses followed entries", async () => {
    enqueue("a-q", 10);
    await appending;
    const { catchUp, positions } = standbyParts(standby);
    const followers = new StandbyFollowers({ log, catchUp, placement: placement(new Set([0])), count: 1, logger: silent });
    followers.refresh();
    await eventually("the standby to have every entry", async () => (positions.get(0) === last.get(0) ? true : undefined), 5_000);
    const resume = await followers.pause(0);
    expect(followers.partitions).toBe(0);
    const atPause = positions.get(0)!;
    enqueue("a-q", 3);
    await appending;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(positions.get(0), "paused: nothing applied").toBe(atPause);
    const result = await catchUp.to(0, last.get(0)!);
    expect(result).toMatchObject({ rebuilt: false, entries: 3 });
    await standby.db.committed();
    await owner.db.committed();
    expect(tasksOf(standby.db, 0)).toEqual(tasksOf(owner.db, 0));
    // Opened for this node's own appends: the position goes, and a follower's entry is refused.
    positions.clear(0);
    expect(catchUp.applyFollowed(0, { seq: last.get(0)! + 1, kind: "records", records: [] })).toBe(false);
    resume();
    await followers.stop();
  });

  it("skips entries its rows already hold (a handoff's load moved the position past the follower)", async () => {
    enqueue("a-q", 4);
    await appending;
    const { catchUp, positions } = standbyParts(standby);
    expect(await catchUp.standbyFrom(0)).toBe(0);
    const entries = await log.read(0, 1, 100);
    for (const entry of entries.slice(0, 2)) expect(catchUp.applyFollowed(0, entry)).toBe(true);
    // As if a handoff's load set the rows at the log's last entry:
    await catchUp.to(0, last.get(0)!);
    const before = tasksOf(standby.db, 0);
    for (const entry of entries.slice(2)) expect(catchUp.applyFollowed(0, entry)).toBe(true);
    await standby.db.committed();
    expect(tasksOf(standby.db, 0)).toEqual(before);
    expect(positions.get(0)).toBe(last.get(0));
  });
});
