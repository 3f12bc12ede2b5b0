/**
 * The data directory through real conveyord processes: one node per directory (a second
 * one exits at once naming the holder; a node killed with -9 leaves no lock behind), an
 * identity that keeps a directory whose database went missing or empty from starting as
 * a new node, and startup refusals that name the file and say what to do.
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, unlinkSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { json, newTask } from "../../src/index.js";
import { NodeProcess, startRefused } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

const WHAT_TO_DO = "restore conveyor.db from a backup, or remove the data directory to start a new, empty node";

/** A stopped node's data dir holding `count` pending tasks of queue "kept". */
async function dirWithTasks(count: number): Promise<{ dir: string; ids: string[] }> {
  const node = await NodeProcess.start();
  const sdk = connect(node);
  const ids = (await Promise.all(Array.from({ length: count }, (_, i) =>
    sdk.client.enqueue(newTask("job", json({ i })), { queue: "kept" })))).map((t) => t.id);
  await sdk.close();
  await node.stop();
  return { dir: node.dataDir, ids };
}

describe("data directory", () => {
  it("initialises a new directory with an identity that survives restarts", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "conveyor-test-")), "new", "nested");
    const node = await NodeProcess.start({ dataDir: dir });
    try {
      const identity = JSON.parse(readFileSync(join(dir, "node.json"), "utf8")) as { id: string; createdAt: string; schemaVersion: number };
      expect(identity.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(Date.parse(identity.createdAt)).toBeGreaterThan(Date.now() - 60_000);
      expect(identity.schemaVersion).toBeGreaterThan(0);
      await node.stop();
      // The schema version is kept current (as after an upgrade that migrated the file).
      writeFileSync(join(dir, "node.json"), JSON.stringify({ ...identity, schemaVersion: 1 }));
      const again = await node.restart();
      await again.stop();
      expect(JSON.parse(readFileSync(join(dir, "node.json"), "utf8"))).toEqual(identity);
      expect(again.logs.some((l) => l.includes(`"identity":"${identity.id}"`) && l.includes(`"opened":"existing"`))).toBe(true);
    } finally {
      await node.stop();
      rmSync(join(dir, "..", ".."), { recursive: true, force: true });
    }
  });

  it("refuses a second node on the same directory at once, naming the holder; a node killed with -9 leaves no lock", async () => {
    const first = await NodeProcess.start();
    const sdk = connect(first);
    try {
      const before = await sdk.client.enqueue(newTask("job", json({})), { queue: "locked" });
      const second = await startRefused(first.dataDir);
      expect(second.code).not.toBe(0);
      expect(second.stderr.trim().split("\n")).toHaveLength(1);
      expect(second.stderr).toContain(`data directory ${first.dataDir} is in use by conveyord pid ${first.child.pid} on host ${hostname()}`);
      expect(second.stderr).toContain("give this one its own --data-dir");
      expect(second.ms).toBeLessThan(10_000);
      // The first node noticed nothing.
      await sdk.client.enqueue(newTask("job", json({})), { queue: "locked" });
      expect(await sdk.counts("locked")).toMatchObject({ pending: 2 });

      await first.kill();
      const restarted = await first.restart();
      try {
        const sdk2 = connect(restarted);
        expect((await sdk2.client.getTask(before.id)).state).toBe("pending");
        await sdk2.close();
      } finally {
        await restarted.stop();
      }
    } finally {
      await sdk.close();
      await first.stop();
      first.cleanup();
    }
  });

  it("refuses to start on a database truncated to 0 bytes, changing nothing; the restored backup starts with its tasks", async () => {
    const { dir, ids } = await dirWithTasks(50);
    try {
      copyFileSync(join(dir, "conveyor.db"), join(dir, "backup.db"));
      truncateSync(join(dir, "conveyor.db"), 0);
      const refused = await startRefused(dir);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain(`${join(dir, "conveyor.db")} is empty (0 bytes)`);
      expect(refused.stderr).toContain(WHAT_TO_DO);
      expect(statSync(join(dir, "conveyor.db")).size).toBe(0);

      copyFileSync(join(dir, "backup.db"), join(dir, "conveyor.db"));
      const node = await NodeProcess.start({ dataDir: dir });
      const sdk = connect(node);
      try {
        expect(await sdk.counts("kept")).toMatchObject({ pending: 50 });
        expect((await sdk.client.getTask(ids[0]!)).state).toBe("pending");
      } finally {
        await sdk.close();
        await node.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a missing database, and one replaced by an empty SQLite file, in a directory that had one", async () => {
    const { dir } = await dirWithTasks(1);
    try {
      unlinkSync(join(dir, "conveyor.db"));
      const missing = await startRefused(dir);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain(`${join(dir, "conveyor.db")} is missing`);
      expect(missing.stderr).toContain(WHAT_TO_DO);
      expect(existsSync(join(dir, "conveyor.db"))).toBe(false);

      const empty = new BetterSqlite3(join(dir, "conveyor.db"));
      empty.exec("CREATE TABLE unrelated (x)");
      empty.close();
      const replaced = await startRefused(dir);
      expect(replaced.code).not.toBe(0);
      expect(replaced.stderr).toContain(`${join(dir, "conveyor.db")} holds no conveyor tables`);
      expect(replaced.stderr).toContain(WHAT_TO_DO);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("names a damaged database and a damaged identity file", async () => {
    const { dir } = await dirWithTasks(1);
    try {
      writeFileSync(join(dir, "conveyor.db"), Buffer.alloc(8192, 7));
      const corrupt = await startRefused(dir);
      expect(corrupt.code).not.toBe(0);
      expect(corrupt.stderr).toContain(`${join(dir, "conveyor.db")} is damaged: it is not a valid database (SQLITE_NOTADB`);
      expect(corrupt.stderr).toContain(WHAT_TO_DO);

      writeFileSync(join(dir, "node.json"), "");
      const identity = await startRefused(dir);
      expect(identity.code).not.toBe(0);
      expect(identity.stderr).toContain(`${join(dir, "node.json")} is not a valid node identity (the file is empty)`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a database migrated by a newer conveyord, changing nothing; the file starts again once its version is ours", async () => {
    const { dir, ids } = await dirWithTasks(1);
    try {
      const db = new BetterSqlite3(join(dir, "conveyor.db"));
      const ours = (db.prepare("SELECT MAX(version) AS v FROM schema_migrations").get() as { v: number }).v;
      db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from-the-future', 0)").run(ours + 1);
      db.close();
      const before = readFileSync(join(dir, "conveyor.db"));
      const refused = await startRefused(dir);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain(`its schema version ${ours + 1} is newer than this conveyord's (${ours}); upgrade conveyord`);
      expect(readFileSync(join(dir, "conveyor.db")).equals(before)).toBe(true);

      const downgrade = new BetterSqlite3(join(dir, "conveyor.db"));
      downgrade.prepare("DELETE FROM schema_migrations WHERE version = ?").run(ours + 1);
      downgrade.close();
      const node = await NodeProcess.start({ dataDir: dir });
      const sdk = connect(node);
      try {
        expect((await sdk.client.getTask(ids[0]!)).state).toBe("pending");
      } finally {
        await sdk.close();
        await node.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("adopts a directory from before identities (a database with tasks and no node.json)", async () => {
    const { dir, ids } = await dirWithTasks(3);
    try {
      unlinkSync(join(dir, "node.json"));
      const node = await NodeProcess.start({ dataDir: dir });
      const sdk = connect(node);
      try {
        expect((await sdk.client.getTask(ids[2]!)).state).toBe("pending");
        expect(node.logs.some((l) => l.includes(`"opened":"adopted"`))).toBe(true);
        expect(existsSync(join(dir, "node.json"))).toBe(true);
      } finally {
        await sdk.close();
        await node.stop();
      }
      // Without an identity, an empty file may be a truncated database: refused too.
      unlinkSync(join(dir, "node.json"));
      truncateSync(join(dir, "conveyor.db"), 0);
      const refused = await startRefused(dir);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain(`${join(dir, "conveyor.db")} is empty (0 bytes) and ${dir} has no node.json`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
