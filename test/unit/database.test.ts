/**
 * Group commit with a savepoint per write, on a real SQLite file in a temp dir: a write
 * that fails is undone alone and only its caller hears of it; a failed commit fails
 * everyone in the transaction; SQLite failures become catalog errors.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { Database } from "../../src/storage/database.js";

let dir: string;
let db: Database;
const rollbacks: unknown[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-db-"));
  db = new Database({ path: join(dir, "conveyor.db"), synchronous: "normal" });
  db.onRollback((error) => rollbacks.push(error));
  rollbacks.length = 0;
  db.sqlite.exec(`CREATE TABLE t (v TEXT NOT NULL);
    CREATE TRIGGER poison BEFORE INSERT ON t WHEN NEW.v = 'poison' BEGIN SELECT RAISE(ABORT, 'forced failure'); END`);
});

afterEach(() => {
  db.sqlite.close();
  rmSync(dir, { recursive: true, force: true });
});

const insert = (v: string) => db.write(() => db.sqlite.prepare("INSERT INTO t (v) VALUES (?)").run(v));
const stored = () => (db.sqlite.prepare("SELECT v FROM t ORDER BY rowid").all() as Array<{ v: string }>).map((r) => r.v);
const caught = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw");
};

describe("Database group commit", () => {
  it("undoes only the failed write of a turn; its neighbours commit", async () => {
    insert("a");
    const error = caught(() => insert("poison"));
    insert("b");
    await db.committed();
    expect(stored()).toEqual(["a", "b"]);
    expect(db.commits).toBe(1);
    expect(rollbacks).toEqual([]);
    expect(error).toBeInstanceOf(ConveyorError);
    expect(error).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
    expect((error as Error).message).toContain("SQLITE_CONSTRAINT_TRIGGER: forced failure");
    expect(((error as Error).cause as { code: string }).code).toBe("SQLITE_CONSTRAINT_TRIGGER");
  });

  it("undoes a failed first write of a transaction alone; the turn's later writes commit", async () => {
    const error = caught(() => insert("poison"));
    insert("a");
    insert("b");
    await db.committed();
    expect(error).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
    expect(stored()).toEqual(["a", "b"]);
    expect(rollbacks).toEqual([]);
  });

  it("undoes every statement of the failed write, nested writes included", async () => {
    insert("a");
    caught(() => db.write(() => {
      insert("b");
      db.sqlite.prepare("INSERT INTO t (v) VALUES ('c')").run();
      insert("poison");
    }));
    await db.committed();
    expect(stored()).toEqual(["a"]);
  });

  it("undoes a failed nested write that opened the transaction", async () => {
    caught(() => db.write(() => {
      insert("b");
      insert("poison");
    }));
    insert("c");
    await db.committed();
    expect(stored()).toEqual(["c"]);
  });

  it("undoes the write and rethrows a non-SQLite error unchanged", async () => {
    const bug = new TypeError("a bug");
    const error = caught(() => db.write(() => {
      db.sqlite.prepare("INSERT INTO t (v) VALUES ('x')").run();
      throw bug;
    }));
    insert("y");
    await db.committed();
    expect(error).toBe(bug);
    expect(stored()).toEqual(["y"]);
  });

  it("a failed commit fails every waiter of the transaction and tells the listeners", async () => {
    db.sqlite.exec(`CREATE TABLE parent (id INTEGER PRIMARY KEY);
      CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`);
    insert("a");
    const first = db.committed();
    db.write(() => db.sqlite.prepare("INSERT INTO child (p) VALUES (42)").run()); // violates at COMMIT only
    const second = db.committed();
    const results = await Promise.allSettled([first, second]);
    for (const r of results) {
      expect(r.status).toBe("rejected");
      // At commit time a constraint is nobody's own fault: retryable, not INVALID_ARGUMENT.
      expect((r as PromiseRejectedResult).reason).toMatchObject({ code: "UNAVAILABLE", reason: "STORAGE_FAILURE" });
    }
    expect(rollbacks).toHaveLength(1);
    expect(stored()).toEqual([]);
    insert("after");
    await db.committed();
    expect(stored()).toEqual(["after"]);
  });

  it("reports a full disk as RESOURCE_EXHAUSTED naming the data directory", async () => {
    insert("seed");
    await db.committed();
    const pages = (db.sqlite.pragma("page_count", { simple: true }) as number);
    db.sqlite.pragma(`max_page_count = ${pages}`);
    const error = caught(() => db.write(() => {
      const put = db.sqlite.prepare("INSERT INTO t (v) VALUES (?)");
      for (let i = 0; i < 100; i++) put.run("x".repeat(4000));
    }));
    expect(error).toMatchObject({ code: "RESOURCE_EXHAUSTED", reason: "DISK_FULL" });
    expect((error as Error).message).toContain(`disk full: the data directory ${dir}`);
    await db.committed().catch(() => {});
    db.sqlite.pragma("max_page_count = 1000000");
    insert("later");
    await db.committed();
    expect(stored()).toEqual(["seed", "later"]);
  });
});
