/**
 * A handoff never replaces the rows of a partition the receiver holds
 * (server/handoff/cluster-service.ts): they are the partition's only copy besides the
 * log. The network fault test found a sender with a stale view (its own claim finished
 * over the record of the handoff it had just made) handing the partition again and
 * again to the node that had claimed it meanwhile, each load replacing the holder's rows
 * with the sender's (empty) ones. And a receiver whose changelog does not answer refuses
 * a handoff at its first chunk (it could not claim the partition), so the sender keeps
 * serving it. Real SQLite files and grains.
 */
import { create } from "@bufbuild/protobuf";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
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

const opened: Array<{ dir: string; data: DataDir }> = [];
function open(): DataDir {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-handoff-refused-"));
  const data = openDataDir({ dir, synchronous: "normal" });
  opened.push({ dir, data });
  return data;
}
afterEach(() => {
  for (const { dir, data } of opened.splice(0)) {
    data.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("a handoff to a node that holds the partition", () => {
  it("is refused, and the holder's rows stay", async () => {
    const receiver = open();
    const store = new TaskStore(receiver.db, { deadRetentionMs: 86_400_000 });
    const grains = new GrainHost({
      store, clock: new FakeClock(Date.UTC(2026, 5, 1, 12)), random: seededRandom(5), newId: leaseIdCounter(), core: coreConfig(), idleMs: 3_600_000,
      cron: cronCalendar, logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(), hooks: { onEvents: () => {} },
    });
    grains.start();
    for (const outcome of grains.get("q").enqueue([newTask({ queue: "q", id: "t1" }), newTask({ queue: "q", id: "t2" })], false)) if (!outcome.ok) throw outcome.error;
    await receiver.db.committed();
    // The sender's view of the partition: no rows.
    const snapshot = new PartitionRows(open().db).snapshot([]);
    const service = clusterService({
      rows: new PartitionRows(receiver.db), positions: new LogPositions(receiver.db), store, holds: (p) => p === 0,
      partitions: 1, partitionOf: () => 0, logger: pino({ level: "silent" }), nowMs: () => Date.now(), ledgers: {} as LedgerHost,
    });
    await expect(service.acceptPartition({
      request: create(AcceptPartitionRequestSchema, { partition: 0, fromNode: "n2", epoch: 7n, transferId: "t", chunk: 0, last: true, data: snapshot.bytes, logSeq: 42n }),
    } as never)).rejects.toMatchObject({ code: "FAILED_PRECONDITION", reason: "PLACEMENT_REFUSED" });
    expect(receiver.db.sqlite.prepare("SELECT COUNT(*) FROM tasks WHERE queue = 'q'").pluck().get()).toBe(2);
    expect(grains.peek("q")).toBeDefined();
    grains.stop();
  });

  it("to a node whose changelog does not answer is refused at its first chunk, and nothing is loaded", async () => {
    const receiver = open();
    const store = new TaskStore(receiver.db, { deadRetentionMs: 86_400_000 });
    const service = clusterService({
      rows: new PartitionRows(receiver.db), positions: new LogPositions(receiver.db), store, holds: () => false,
      logAnswers: () => Promise.reject(new ConveyorError("UNAVAILABLE", "LOG_UNAVAILABLE", "the changelog did not answer")),
      partitions: 1, partitionOf: () => 0, logger: pino({ level: "silent" }), nowMs: () => Date.now(), ledgers: {} as LedgerHost,
    });
    const snapshot = new PartitionRows(open().db).snapshot([]);
    await expect(service.acceptPartition({
      request: create(AcceptPartitionRequestSchema, { partition: 0, fromNode: "n2", epoch: 7n, transferId: "t", chunk: 0, last: true, data: snapshot.bytes, logSeq: 42n }),
    } as never)).rejects.toMatchObject({ code: "UNAVAILABLE", reason: "LOG_UNAVAILABLE" });
    expect(new LogPositions(receiver.db).get(0)).toBeUndefined();
  });
});
