/**
 * ListQueues' counts over gRPC on a real node equal a COUNT(*) of the rows in its data
 * file (read through a second, read-only SQLite connection: WAL lets it see every
 * committed write), through a workload that uses every RPC that moves tasks between
 * states, a kill -9 right after acknowledged writes, a restart, and a queue's removal.
 * The depth gauge reads the same counts.
 */
import BetterSqlite3 from "better-sqlite3";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { json, newTask } from "../../src/index.js";
import { BulkAction } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { DB_FILE } from "../../src/storage/data-dir.js";
import { NodeProcess } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

type Sdk = ReturnType<typeof connect>;

/** queue/state -> n from the rows themselves. */
function rowCounts(dataDir: string): Record<string, number> {
  const db = new BetterSqlite3(join(dataDir, DB_FILE), { readonly: true });
  try {
    const rows = db.prepare("SELECT queue, state, COUNT(*) AS n FROM tasks GROUP BY queue, state").all() as Array<{ queue: string; state: string; n: number }>;
    return Object.fromEntries(rows.map((r) => [`${r.queue}/${r.state}`, r.n]));
  } finally {
    db.close();
  }
}

/** queue/state -> n as ListQueues answers. */
async function listed(sdk: Sdk): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const q of (await sdk.admin.listQueues({})).queues) {
    for (const [state, n] of Object.entries(q.counts ?? {})) if (typeof n === "bigint" && n > 0n) out[`${q.name}/${state}`] = Number(n);
  }
  return out;
}

async function expectExact(node: NodeProcess, sdk: Sdk): Promise<Record<string, number>> {
  const answer = await listed(sdk);
  expect(answer).toEqual(rowCounts(node.dataDir));
  return answer;
}

describe("task counts over gRPC", () => {
  it("equal the rows through a workload, a kill -9 and a queue's removal", async () => {
    let node = await NodeProcess.start();
    let sdk = connect(node);
    try {
      const queue = "counted";
      const ids = (await Promise.all(Array.from({ length: 30 }, (_, i) =>
        sdk.client.enqueue(newTask("job", json({ i })), { queue })))).map((t) => t.id);
      await sdk.client.enqueue(newTask("job", json({})), { queue, processIn: "1h" });
      await sdk.client.enqueue(newTask("job", json({})), { queue: "other" });
      expect(await expectExact(node, sdk)).toMatchObject({ "counted/pending": 30, "counted/scheduled": 1, "other/pending": 1 });

      const leased = await sdk.workerRpc.lease({ workerId: "t", queues: [{ queue, weight: 1 }], maxDeliveries: 12, waitMs: 0 });
      const outcomes = [Outcome.SUCCESS, Outcome.RETRY, Outcome.SKIP_RETRY, Outcome.RELEASED];
      await sdk.workerRpc.settle({
        workerId: "t",
        settlements: leased.deliveries.slice(0, 8).map((d, i) => ({ queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome: outcomes[i % 4]!, error: "x" })),
      });
      await sdk.client.cancelTask(ids[20]!);
      await sdk.admin.archiveTask({ id: ids[21]! });
      await sdk.admin.deleteTask({ id: ids[22]! });
      await sdk.admin.bulkTaskAction({ queue, action: BulkAction.CANCEL, state: TaskState.PENDING });
      await sdk.admin.bulkTaskAction({ queue, action: BulkAction.RETRY, state: TaskState.ARCHIVED });
      const before = await expectExact(node, sdk);
      expect(before["counted/active"]).toBe(4);

      // kill -9 right after acknowledged writes: the counts on disk are the rows on disk.
      await node.kill();
      await sdk.close();
      node = await node.restart();
      sdk = connect(node);
      const restarted = await expectExact(node, sdk);
      // Same tasks; only a retry whose backoff ended meanwhile may have moved to pending.
      const total = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);
      expect(total(restarted)).toBe(total(before));
      for (const key of ["counted/active", "counted/completed", "counted/cancelled", "counted/scheduled"]) expect(restarted[key]).toBe(before[key]);
      const depth = await node.metrics();
      expect(depth).toContain(`conveyor_queue_depth{queue="counted",state="active"} 4`);

      // Removal needs no unfinished task: finish the leased ones (their leases survived the
      // crash), cancel the rest, then remove; the queue is gone from the list.
      await sdk.workerRpc.settle({
        workerId: "t",
        settlements: leased.deliveries.slice(8).map((d) => ({ queue, leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome: Outcome.SUCCESS })),
      });
      // Retry and scheduled first: a task whose backoff or time runs out moves to pending
      // meanwhile (never back), and the pending cancel comes after it (a retry's backoff ending
      // between the cancels left it pending in a loaded CI run).
      for (const state of [TaskState.RETRY, TaskState.SCHEDULED, TaskState.PENDING]) {
        await sdk.admin.bulkTaskAction({ queue, action: BulkAction.CANCEL, state });
      }
      await sdk.admin.deleteQueue({ queue });
      const after = await expectExact(node, sdk);
      expect(Object.keys(after).some((k) => k.startsWith("counted/"))).toBe(false);
      expect(after).toEqual({ "other/pending": 1 });
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  }, 120_000);
});
