/**
 * The receiving side of a handoff (server/handoff/cluster-service.ts, AcceptPartition) on
 * real SQLite files with real grains: a node that held the partition before and lost it
 * without handing it off (paused past its lease, then taken over from the changelog) may
 * still have that stay's grains in memory. Loading the partition's rows replaces the rows
 * those grains were built on, so they must go: the claim that follows activates the
 * queues from the loaded rows (the zombie test, changelog-zombie.test.ts, found a node
 * serving its old memory after such a handback: tasks enqueued meanwhile never ran).
 */
import { create } from "@bufbuild/protobuf";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import { AcceptPartitionRequestSchema } from "../../src/gen/conveyor/v1/cluster_service_pb.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { cronCalendar } from "../../src/server/cron-calendar.js";
import { clusterService } from "../../src/server/handoff/cluster-service.js";
import type { LedgerHost } from "../../src/server/ledger/ledger-host.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { LogPositions } from "../../src/storage/log-positions.js";
import { PartitionRows } from "../../src/storage/partition-rows.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

/** Queues "a…" are partition 0, the rest partition 1. */
const partitionOf = (queue: string) => (queue.startsWith("a") ? 0 : 1);

let dirs: string[];
let sender: DataDir;
let receiver: DataDir;

function open(): DataDir {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-handoff-load-"));
  dirs.push(dir);
  return openDataDir({ dir, synchronous: "normal" });
}

/** Real grains on `store`, wired as node.ts wires them: rows replaced outside the grains end their memory. */
function grainsOn(store: TaskStore): GrainHost {
  const grains = new GrainHost({
    store, clock: new FakeClock(Date.UTC(2026, 5, 1, 12)), random: seededRandom(5), newId: leaseIdCounter(), core: coreConfig(), idleMs: 3_600_000,
    cron: cronCalendar, logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(), hooks: { onEvents: () => {} },
  });
  store.onForget((queues) => queues.forEach((q) => grains.deactivate(q, "replaced")));
  grains.start();
  return grains;
}

function enqueue(host: GrainHost, queue: string, ids: string[]): void {
  for (const outcome of host.get(queue).enqueue(ids.map((id) => newTask({ queue, id })), false)) if (!outcome.ok) throw outcome.error;
}

beforeEach(() => {
  dirs = [];
  sender = open();
  receiver = open();
});

afterEach(() => {
  sender.close();
  receiver.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("loading a handed-off partition's rows", () => {
  it("drops the grains here that were built on the rows it replaces (the partition's queues in the snapshot and the stale ones), and no other", async () => {
    // The receiver's earlier stay: grains of two queues of partition 0, and one of partition 1.
    const receiverStore = new TaskStore(receiver.db, { deadRetentionMs: 86_400_000 });
    const here = grainsOn(receiverStore);
    enqueue(here, "a-one", ["old-1", "old-2"]);
    enqueue(here, "a-gone", ["old-3"]);
    enqueue(here, "b-other", ["other-1"]);
    await receiver.db.committed();

    // Meanwhile the partition went on elsewhere: old-1 completed, old-2 still pending, new-1 enqueued.
    const senderStore = new TaskStore(sender.db, { deadRetentionMs: 86_400_000 });
    const there = grainsOn(senderStore);
    enqueue(there, "a-one", ["old-1", "old-2", "new-1"]);
    const [d] = there.get("a-one").lease(1, { batchTypes: new Set() }, Infinity, "w1");
    there.get("a-one").settle([{ leaseId: d!.leaseId, taskId: d!.taskIds[0]!, outcome: "success" }]);
    await sender.db.committed();
    const snapshot = new PartitionRows(sender.db).snapshot(["a-one"]);

    const service = clusterService({
      rows: new PartitionRows(receiver.db), positions: new LogPositions(receiver.db), store: receiverStore, partitions: 2, partitionOf,
      logger: pino({ level: "silent" }), nowMs: () => Date.now(), ledgers: {} as LedgerHost,
    });
    await service.acceptPartition({
      request: create(AcceptPartitionRequestSchema, { partition: 0, fromNode: "n2", epoch: 7n, transferId: "t1", chunk: 0, last: true, data: snapshot.bytes, logSeq: 42n }),
    } as never);
    await receiver.db.committed();

    expect(here.peek("a-one"), "the grain of a queue whose rows were loaded").toBeUndefined();
    expect(here.peek("a-gone"), "the grain of a stale queue of the partition").toBeUndefined();
    expect(here.peek("b-other"), "another partition's grain").toBeDefined();
    // Activated again (as the claim does), the queue is what the sender had.
    expect(here.get("a-one").idsInState("pending").sort()).toEqual(["new-1", "old-2"]);
    expect(here.get("a-gone").hasTasks()).toBe(false);
    // A later enqueue on the stale queue creates its row again (the store forgot it had one).
    enqueue(here, "a-gone", ["again-1"]);
    await receiver.db.committed();
    expect(receiver.db.sqlite.prepare("SELECT COUNT(*) FROM queues WHERE name = 'a-gone'").pluck().get()).toBe(1);
    here.stop();
    there.stop();
  });
});
