/**
 * A full disk under a worker polling a queue with a backlog (issue 34): a refused commit
 * must not make the node reload the backlog on every poll, a refused write is logged
 * once per interval rather than with a stack each time, and once space is freed every
 * task completes with nothing lost.
 *
 * The node's data dir is a 16 MiB tmpfs in a mount namespace of its own (root and
 * `unshare`, as in storage-failures.test.ts).
 */
import { execFileSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { NodeProcess, eventually } from "../support/node-process.js";
import { connect, rejection } from "../support/sdk.js";

const canMountTmpfs = (() => {
  if (process.platform !== "linux" || process.getuid?.() !== 0) return false;
  const dir = mkdtempSync(join(tmpdir(), "conveyor-tmpfs-probe-"));
  try {
    execFileSync("unshare", ["-m", "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0"', dir], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
})();

function fillDisk(path: string): void {
  const fd = openSync(path, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  } finally {
    closeSync(fd);
  }
}

const BACKLOG = 3_000;
const POLLS = 40;

/** How many times `queue`'s grain has had `event` so far ("activated": loaded from SQLite; "failed": dropped after a failed write). */
async function lifecycle(node: NodeProcess, queue: string, event: "activated" | "failed"): Promise<number> {
  const metrics = await node.metrics();
  return Number(new RegExp(`conveyor_grain_lifecycle_total\\{queue="${queue}",event="${event}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);
}

describe.skipIf(!canMountTmpfs)("a full disk under a polling worker (needs root and unshare)", () => {
  it("does not reload the queue's backlog on every poll, logs refusals once per interval, and loses nothing", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "conveyor-full-backlog-"));
    // Inline checkpoints, and the WAL truncated before the disk fills: every commit must then grow the WAL.
    const node = await NodeProcess.start({
      dataDir, prefix: ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=16m tmpfs "$0" && exec "$@"', dataDir],
      settings: { sqlite_checkpoints: "inline" },
    });
    const root = join(`/proc/${node.child.pid}/root`, dataDir);
    const filler = join(root, "filler");
    const sdk = connect(node);
    try {
      for (let i = 0; i < BACKLOG; i += 500) {
        const answers = await sdk.client.enqueueBatch(Array.from({ length: 500 }, (_, j) => ({
          task: newTask("job", json({ n: i + j })), options: { queue: "backlog" },
        })));
        expect(answers.every((a) => "id" in a)).toBe(true);
      }
      // A queue in memory that writes nothing while the disk is full: its grain is not dropped.
      await sdk.client.enqueue(newTask("job", json({ bystander: true })), { queue: "bystander" });
      const external = new BetterSqlite3(join(root, "conveyor.db"));
      external.pragma("wal_checkpoint(TRUNCATE)");
      external.close();
      fillDisk(filler);

      const before = await lifecycle(node, "backlog", "activated");
      const logLinesBefore = node.logs.length;
      const started = performance.now();
      for (let i = 0; i < POLLS; i++) {
        const refused = await rejection(sdk.leaseNow("backlog", 10));
        expect(refused).toMatchObject({ code: "RESOURCE_EXHAUSTED", reason: "DISK_FULL" });
      }
      const elapsedMs = performance.now() - started;
      const reloads = (await lifecycle(node, "backlog", "activated")) - before;
      const logLines = node.logs.slice(logLinesBefore);
      const stackLines = logLines.filter((l) => l.includes('"stack"'));
      console.log(`${POLLS} polls on a full disk with ${BACKLOG} pending: ${reloads} reloads of the backlog, ` +
        `${logLines.length} log lines (${stackLines.length} with a stack), ${elapsedMs.toFixed(0)} ms`);
      // The first refused commit drops the grain once (its memory ran ahead of disk); after
      // that the node tries a write again only when its backoff (1 s, doubling) runs out,
      // each try costing at most one more reload. Before the fix: one reload per poll.
      const backoffsElapsed = Math.ceil(Math.log2(1 + elapsedMs / 1_000));
      expect(reloads).toBeLessThanOrEqual(1 + backoffsElapsed);
      // One line for the first refusal; the others are counted into one line per 10 s.
      expect(stackLines).toHaveLength(0);
      expect(logLines.filter((l) => l.includes("DISK_FULL") || l.includes("disk full")).length).toBeLessThanOrEqual(1 + Math.ceil(elapsedMs / 10_000));
      expect(await lifecycle(node, "bystander", "failed")).toBe(0);
      // Reads still answer, and say nothing moved.
      expect(await sdk.counts("backlog")).toMatchObject({ pending: BACKLOG, active: 0 });

      // Space returns: a worker runs the whole backlog, nothing lost.
      unlinkSync(filler);
      const done = new Set<number>();
      const mux = new Mux().handle("job", async (task) => {
        done.add((task.json() as { n: number }).n);
      });
      sdk.worker(mux, { queues: ["backlog"], concurrency: 50 });
      await eventually(`all ${BACKLOG} tasks completed`, async () => {
        const c = await sdk.counts("backlog");
        return c.completed === BACKLOG ? c : undefined;
      }, 60_000);
      expect(await sdk.counts("backlog")).toMatchObject({ pending: 0, active: 0, retry: 0, completed: BACKLOG });
      expect(done.size).toBe(BACKLOG);
    } finally {
      await sdk.close();
      await node.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
