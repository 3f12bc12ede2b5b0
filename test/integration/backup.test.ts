/**
 * `conveyord backup`: a copy of a live node's data file, taken from a second process
 * while producers and a worker keep writing, restores into a new data dir where a new
 * node finds every task acknowledged before the backup started, in the state it had.
 */
import BetterSqlite3 from "better-sqlite3";
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { json, newTask } from "../../src/index.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

const execFileAsync = promisify(execFile);
const DAEMON = join(REPO_ROOT, "bin/conveyord.js");

describe("conveyord backup", () => {
  it("copies a node under writes; a node started on the restored copy has every acknowledged task", async () => {
    const node = await NodeProcess.start();
    const sdk = connect(node);
    const out = mkdtempSync(join(tmpdir(), "conveyor-backup-"));
    let restored: NodeProcess | undefined;
    let restoredSdk: ReturnType<typeof connect> | undefined;
    let pin: BetterSqlite3.Database | undefined;
    try {
      // Some volume, so the copy is more than a handful of pages: ~10 MB of payloads.
      const filler = "x".repeat(2_000);
      for (let b = 0; b < 5; b++) {
        const res = await sdk.taskRpc.enqueueBatch({
          tasks: Array.from({ length: 1_000 }, (_, i) => ({
            type: "bulk", queue: "preload", payload: new TextEncoder().encode(JSON.stringify({ b, i, filler })), contentType: "application/json",
          })),
        });
        expect(res.items.every((r) => r.outcome.case === "result")).toBe(true);
      }
      // Lease 100 and settle 60 as completed, each acknowledged.
      const leased = await sdk.leaseNow("preload", 100);
      expect(leased).toHaveLength(100);
      const settled = leased.slice(0, 60);
      const res = await sdk.workerRpc.settle({
        workerId: "test",
        settlements: settled.map((d) => ({ queue: "preload", leaseId: d.leaseId, taskId: d.tasks[0]!.id, outcome: Outcome.SUCCESS })),
      });
      expect(res.results.every((r) => !r.error)).toBe(true);

      // A reader holding an old snapshot: checkpoints cannot move later commits into the
      // main file, so they live only in the WAL (a plain file copy would miss them).
      pin = new BetterSqlite3(join(node.dataDir, "conveyor.db"), { readonly: true });
      pin.exec("BEGIN");
      pin.prepare("SELECT COUNT(*) FROM tasks").get();

      // Producers keep writing to "live" while the backup runs; each ack is timestamped.
      const acks: Array<{ id: string; at: number }> = [];
      let writing = true;
      const producers = Array.from({ length: 8 }, async (_, p) => {
        for (let i = 0; writing; i++) {
          const info = await sdk.client.enqueue(newTask("live", json({ p, i })), { queue: "live" });
          acks.push({ id: info.id, at: performance.now() });
        }
      });
      while (acks.length < 200) await new Promise((r) => setImmediate(r)); // writes are flowing
      const backupStarted = performance.now();
      const { stdout } = await execFileAsync(process.execPath, [DAEMON, "backup", "--data-dir", node.dataDir, "--out", join(out, "conveyor.db")]);
      const backupEnded = performance.now();
      writing = false;
      await Promise.all(producers);
      pin.close(); // ends its read transaction
      expect(stdout).toMatch(/^backed up .*conveyor\.db to .*: \d+ bytes, \d+ tasks, schema version \d+, in \d+ ms\n$/);
      const before = acks.filter((a) => a.at < backupStarted).map((a) => a.id);
      const during = acks.filter((a) => a.at >= backupStarted && a.at <= backupEnded);
      expect(during.length).toBeGreaterThan(0); // the node really was written to while the copy ran
      // One self-contained file, and a second backup to the same path is refused.
      expect(existsSync(join(out, "conveyor.db-wal"))).toBe(false);
      await expect(execFileAsync(process.execPath, [DAEMON, "backup", "--data-dir", node.dataDir, "--out", join(out, "conveyor.db")]))
        .rejects.toMatchObject({ code: 1, stderr: expect.stringContaining("already exists (--force replaces it)") });

      // Restore as the README says: the copy becomes conveyor.db of a new data dir.
      const dataDir = mkdtempSync(join(tmpdir(), "conveyor-restored-"));
      copyFileSync(join(out, "conveyor.db"), join(dataDir, "conveyor.db"));
      restored = await NodeProcess.start({ dataDir });
      restoredSdk = connect(restored);
      const listAll = async (queue: string) => {
        const tasks = new Map<string, string>();
        let pageToken = "";
        do {
          const page = await restoredSdk!.admin.listTasks({ queue, pageSize: 1000, pageToken });
          for (const t of page.tasks) tasks.set(t.id, t.state.toString());
          pageToken = page.nextPageToken;
        } while (pageToken);
        return tasks;
      };
      const live = await listAll("live");
      expect(before.filter((id) => !live.has(id))).toEqual([]); // every task acknowledged before the backup
      expect(live.size).toBeLessThanOrEqual(acks.length);
      const counts = await restoredSdk.counts("preload");
      expect(counts.completed).toBe(60);
      expect(counts.pending + counts.active + counts.retry).toBe(5_000 - 60);
      for (const d of settled.slice(0, 5)) expect((await restoredSdk.client.getTask(d.tasks[0]!.id)).state).toBe("completed");
      // The restored node takes new work.
      const fresh = await restoredSdk.client.enqueue(newTask("after", json({})), { queue: "live" });
      expect((await restoredSdk.client.getTask(fresh.id)).state).toBe("pending");
    } finally {
      pin?.close();
      await restoredSdk?.close();
      await restored?.stop();
      restored?.cleanup();
      await sdk.close();
      await node.stop();
      node.cleanup();
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});
