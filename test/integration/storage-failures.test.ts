/**
 * Storage failures through a real node: a write the data file refuses fails only the
 * request it belongs to (a SQLite trigger forces the failure for one task type), and a
 * full disk is RESOURCE_EXHAUSTED naming the data directory while reads keep working
 * and writes resume on their own once space is freed.
 */
import { execFileSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { ConveyorError, bytes, json, newTask } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, rejection, runCli } from "../support/sdk.js";

/** A node whose data file refuses every task of type "poison" (a trigger installed while it was stopped). */
async function nodeWithPoisonTrigger(): Promise<NodeProcess> {
  const first = await NodeProcess.start();
  await first.stop();
  const db = new BetterSqlite3(join(first.dataDir, "conveyor.db"));
  db.exec(`CREATE TRIGGER poison BEFORE INSERT ON tasks WHEN NEW.type = 'poison'
    BEGIN SELECT RAISE(ABORT, 'forced failure'); END`);
  db.close();
  return first.restart();
}

describe("a write the data file refuses", () => {
  it("fails only its own request: its neighbours in the same turn are stored and the queue keeps working", async () => {
    const node = await nodeWithPoisonTrigger();
    const sdk = connect(node);
    try {
      // One client, one turn: the SDK coalesces these 21 calls into one EnqueueBatch, and
      // the poison task shares its queue's grain turn with 10 of them.
      const calls = [
        ...Array.from({ length: 10 }, (_, i) => sdk.client.enqueue(newTask("job", json({ i })), { queue: "poisoned" })),
        sdk.client.enqueue(newTask("poison", json({})), { queue: "poisoned" }),
        ...Array.from({ length: 10 }, (_, i) => sdk.client.enqueue(newTask("job", json({ i })), { queue: "neighbour" })),
      ];
      const settled = await Promise.allSettled(calls);
      const failed = settled.filter((s) => s.status === "rejected");
      expect(failed).toHaveLength(1);
      expect(settled[10]!.status).toBe("rejected");
      const error = (failed[0] as PromiseRejectedResult).reason as ConveyorError;
      expect(error).toBeInstanceOf(ConveyorError);
      expect(error).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
      expect(error.message).toContain("forced failure");

      for (const s of settled.filter((x) => x.status === "fulfilled")) {
        const { id } = (s as PromiseFulfilledResult<{ id: string }>).value;
        expect((await sdk.client.getTask(id)).state).toBe("pending");
      }
      expect(await sdk.counts("poisoned")).toMatchObject({ pending: 10 });
      expect(await sdk.counts("neighbour")).toMatchObject({ pending: 10 });

      // The queue keeps working: more tasks go in, and all of them can be leased.
      await sdk.client.enqueue(newTask("job", json({ after: true })), { queue: "poisoned" });
      expect(await sdk.leaseNow("poisoned")).toHaveLength(11);
      expect(await sdk.leaseNow("neighbour")).toHaveLength(10);
      // Nothing was rolled back for everyone.
      expect(node.logs.some((l) => l.includes("storage transaction rolled back"))).toBe(false);
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("fails a single enqueue and a whole EnqueueTx, storing nothing of either", async () => {
    const node = await nodeWithPoisonTrigger();
    const sdk = connect(node);
    try {
      const single = await rejection(sdk.client.enqueue(newTask("poison", json({})), { queue: "q" }));
      expect(single).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
      const tx = await rejection(sdk.taskRpc.enqueueTx({ tasks: [
        { type: "job", queue: "q", payload: new Uint8Array(), contentType: "application/json" },
        { type: "poison", queue: "q", payload: new Uint8Array(), contentType: "application/json" },
      ] }));
      expect(tx).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
      expect(await sdk.counts("q")).toMatchObject({ pending: 0 });
      const ok = await sdk.client.enqueue(newTask("job", bytes(new Uint8Array([1]))), { queue: "q" });
      expect((await sdk.client.getTask(ok.id)).state).toBe("pending");
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });
});

/** A tmpfs of its own for the node needs a mount namespace: root and util-linux `unshare`. */
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

/** Writes `path` until the file system says ENOSPC. */
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

describe.skipIf(!canMountTmpfs)("a full disk (the node's data dir on a small tmpfs of its own; needs root and unshare)", () => {
  it("is RESOURCE_EXHAUSTED naming the data dir; reads keep working; writes resume once space is freed", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "conveyor-full-"));
    // The tmpfs lives in the node's own mount namespace (gone with the process); the test
    // reaches into it through /proc/<pid>/root.
    // Inline checkpoints: the point is a commit that needs the WAL to grow. With them in the
    // background, the seed's frames are copied out at once and the next commit starts the
    // WAL over inside the file it already has, so a small write succeeds on a full disk
    // (rightly); SQLite checkpoints inline only past 1,000 frames, which this test stays under.
    const node = await NodeProcess.start({
      dataDir, prefix: ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=16m tmpfs "$0" && exec "$@"', dataDir],
      settings: { sqlite_checkpoints: "inline" },
    });
    const filler = join(`/proc/${node.child.pid}/root`, dataDir, "filler");
    const sdk = connect(node);
    try {
      const seed = await sdk.client.enqueue(newTask("job", json({ seed: true })), { queue: "full" });
      fillDisk(filler);

      // Every commit appends to the WAL, which now has no room to grow.
      const cli = await runCli(node, "enqueue", "--type", "job", "--queue", "full").then(
        () => undefined, (e: { code: number; stderr: string }) => e);
      expect(cli?.code).toBe(1);
      expect(cli?.stderr).toContain(`error: disk full: the data directory ${dataDir} has no space left`);

      const big = () => Array.from({ length: 8 }, (_, i) =>
        sdk.client.enqueue(newTask("job", bytes(new Uint8Array(512 * 1024).fill(i))), { queue: "full" }));
      const failed = await Promise.allSettled(big());
      for (const f of failed) {
        expect(f.status).toBe("rejected");
        const error = (f as PromiseRejectedResult).reason as ConveyorError;
        expect(error).toMatchObject({ code: "RESOURCE_EXHAUSTED", reason: "DISK_FULL" });
        expect(error.message).toContain(`disk full: the data directory ${dataDir}`);
      }

      // Reads need no space.
      expect((await sdk.client.getTask(seed.id)).state).toBe("pending");
      expect(await sdk.counts("full")).toMatchObject({ pending: 1 });
      expect((await fetch(`http://${node.httpAddress}/healthz`)).status).toBe(200);

      // Space returns: the same writes go through, with no restart.
      unlinkSync(filler);
      const stored = await Promise.all(big());
      expect(stored).toHaveLength(8);
      expect(await sdk.counts("full")).toMatchObject({ pending: 9 });
      // A Lease answer carries about 256 KiB of payloads (its first delivery always goes): ask until all nine came.
      const leased: unknown[] = [];
      for (let asks = 0; asks < 9 && leased.length < 9; asks++) leased.push(...await sdk.leaseNow("full"));
      expect(leased).toHaveLength(9);
    } finally {
      await sdk.close();
      await node.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("with background checkpoints (the default): a commit larger than the WAL's room fails DISK_FULL, and the node recovers", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "conveyor-full-"));
    const node = await NodeProcess.start({
      dataDir, prefix: ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=16m tmpfs "$0" && exec "$@"', dataDir],
    });
    const filler = join(`/proc/${node.child.pid}/root`, dataDir, "filler");
    const sdk = connect(node);
    try {
      const seed = await sdk.client.enqueue(newTask("job", json({ seed: true })), { queue: "full" });
      fillDisk(filler);
      // 4 MiB in one turn: more than the WAL file holds (a few hundred KiB here), so the WAL must grow.
      const big = () => Array.from({ length: 8 }, (_, i) =>
        sdk.client.enqueue(newTask("job", bytes(new Uint8Array(512 * 1024).fill(i))), { queue: "full" }));
      const failed = await Promise.allSettled(big());
      for (const f of failed) {
        expect(f.status).toBe("rejected");
        expect((f as PromiseRejectedResult).reason).toMatchObject({ code: "RESOURCE_EXHAUSTED", reason: "DISK_FULL" });
      }
      expect((await sdk.client.getTask(seed.id)).state).toBe("pending");
      expect((await fetch(`http://${node.httpAddress}/healthz`)).status).toBe(200);

      unlinkSync(filler);
      expect(await Promise.all(big())).toHaveLength(8);
      expect(await sdk.counts("full")).toMatchObject({ pending: 9 });
      // The checkpoint thread never stopped (a failed checkpoint is retried, not a fallback).
      expect(node.logs.some((l) => l.includes("the WAL checkpoint thread stopped"))).toBe(false);
    } finally {
      await sdk.close();
      await node.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
