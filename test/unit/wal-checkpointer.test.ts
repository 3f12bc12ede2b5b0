/**
 * WAL checkpoints on their own thread (wal-checkpointer.ts), on real SQLite files in a
 * temp dir: the committing connection never checkpoints by itself, the thread copies the
 * WAL into the file, the WAL stays bounded under commits that never pause, a thread that
 * fails hands checkpoints back to SQLite, and closing leaves one connection to remove
 * the WAL.
 */
import BetterSqlite3 from "better-sqlite3";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Database } from "../../src/storage/database.js";
import { WalCheckpointer } from "../../src/storage/wal-checkpointer.js";
import { eventually } from "../support/node-process.js";

let dir: string;
const toClose: Array<{ close(): void }> = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-wal-"));
});

afterEach(() => {
  for (const c of toClose.splice(0).reverse()) c.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A WAL database with a table whose rows fill a page each (one WAL frame per row). */
function openFile(name = "t.db"): { path: string; sqlite: BetterSqlite3.Database } {
  const path = join(dir, name);
  const sqlite = new BetterSqlite3(path);
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = NORMAL");
  sqlite.exec("CREATE TABLE t (v BLOB NOT NULL)");
  return { path, sqlite };
}

const PAGE = Buffer.alloc(3000, 1);
const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve));

describe("WalCheckpointer", () => {
  it("turns SQLite's automatic checkpoints off and copies the WAL into the file from its thread", async () => {
    const { path, sqlite } = openFile();
    const checkpointer = new WalCheckpointer(sqlite, path, { intervalMs: 0 });
    toClose.push(sqlite, checkpointer);
    expect(sqlite.pragma("wal_autocheckpoint", { simple: true })).toBe(0);

    const insert = sqlite.prepare("INSERT INTO t (v) VALUES (?)");
    // Past SQLite's own threshold (1,000 pages): had the connection checkpointed, the WAL would have restarted.
    for (let i = 0; i < 1500; i++) insert.run(PAGE);
    checkpointer.committed();
    const report = await eventually("a background checkpoint", async () => checkpointer.lastReport);
    expect(report.log).toBeGreaterThanOrEqual(1500);
    expect(report.checkpointed).toBe(report.log);
    expect(checkpointer.checkpoints).toBe(1);

    // Everything was copied and nothing written since: the next write starts the WAL over.
    insert.run(PAGE);
    checkpointer.committed();
    const next = await eventually("the next checkpoint", async () => (checkpointer.checkpoints === 2 ? checkpointer.lastReport : undefined));
    expect(next.log).toBeLessThan(10);
    // A second connection reads every row from the file.
    const reader = new BetterSqlite3(path, { readonly: true });
    toClose.push(reader);
    expect(reader.prepare("SELECT count(*) AS n FROM t").get()).toEqual({ n: 1501 });
  });

  it("keeps the WAL bounded while commits never pause, by catching up between two transactions", async () => {
    const { path, sqlite } = openFile();
    const resetFrames = 200;
    const checkpointer = new WalCheckpointer(sqlite, path, { intervalMs: 0, resetFrames });
    toClose.push(sqlite, checkpointer);
    const insert = sqlite.prepare("INSERT INTO t (v) VALUES (?)");
    const commit = () => {
      sqlite.transaction(() => {
        for (let i = 0; i < 10; i++) insert.run(PAGE);
      })();
      checkpointer.committed();
    };
    // The thread is up once it has answered.
    commit();
    await eventually("the first checkpoint", async () => checkpointer.lastReport);
    let largest = 0;
    let commits = 0;
    // Commits of 10 frames, the event loop turning between them (as a node's does), until
    // the thread has checkpointed sixty times more.
    const target = checkpointer.checkpoints + 60;
    while (checkpointer.checkpoints < target && commits < 50_000) {
      commit();
      commits += 1;
      largest = Math.max(largest, checkpointer.lastReport?.log ?? 0);
      await yieldToLoop();
    }
    expect(checkpointer.checkpoints).toBeGreaterThanOrEqual(target);
    // A WAL past resetFrames restarts at the next write (the catch-up), whoever wins the
    // race between the thread's checkpoint and the next commit: it grows by what is written
    // during one checkpoint, not by everything written (which it does without the catch-up).
    expect(largest).toBeLessThan((commits * 10) / 3);
  });

  it("hands checkpoints back to SQLite when its thread cannot work, and says so once", async () => {
    const { sqlite } = openFile();
    const failures: Array<{ error: Error; fallback: boolean }> = [];
    // The thread's connection opens with fileMustExist: a path with no file ends the thread.
    const checkpointer = new WalCheckpointer(sqlite, join(dir, "missing.db"), { onFailure: (error, fallback) => failures.push({ error, fallback }) });
    toClose.push(sqlite, checkpointer);
    checkpointer.committed();
    await eventually("the failure", async () => (failures.length > 0 ? true : undefined));
    expect(failures).toHaveLength(1);
    expect(failures[0]!.fallback).toBe(true);
    expect(failures[0]!.error.message).toMatch(/the WAL checkpoint thread stopped: .*unable to open/);
    expect(sqlite.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
    checkpointer.committed();
    expect(failures).toHaveLength(1);
  });
});

describe("Database with background checkpoints", () => {
  it("checkpoints off its event loop, and its close leaves no WAL behind", async () => {
    const path = join(dir, "conveyor.db");
    const db = new Database({ path, synchronous: "normal", checkpoints: "background" });
    expect(db.sqlite.pragma("wal_autocheckpoint", { simple: true })).toBe(0);
    db.sqlite.exec("CREATE TABLE t (v BLOB NOT NULL)");
    const insert = db.sqlite.prepare("INSERT INTO t (v) VALUES (?)");
    for (let i = 0; i < 50; i++) {
      db.write(() => insert.run(PAGE));
      await db.committed();
    }
    const checkpointer = db.checkpointer!;
    await eventually("a background checkpoint", async () => (checkpointer.checkpoints > 0 ? true : undefined));
    expect(existsSync(`${path}-wal`)).toBe(true);
    db.close();
    // The thread closed its connection first, so the node's was the last: SQLite removed the WAL.
    expect(existsSync(`${path}-wal`)).toBe(false);
    const reopened = new BetterSqlite3(path, { readonly: true });
    expect(reopened.prepare("SELECT count(*) AS n FROM t").get()).toEqual({ n: 50 });
    reopened.close();
  });

  it("keeps SQLite's own checkpoints unless asked (and always for :memory:)", () => {
    const inline = new Database({ path: join(dir, "inline.db"), synchronous: "normal" });
    const memory = new Database({ path: ":memory:", synchronous: "normal", checkpoints: "background" });
    toClose.push(inline, memory);
    expect(inline.checkpointer).toBeUndefined();
    expect(memory.checkpointer).toBeUndefined();
    expect(inline.sqlite.pragma("wal_autocheckpoint", { simple: true })).toBe(1000);
  });
});
