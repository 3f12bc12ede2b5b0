/**
 * Activation reads back only the columns the grain's entry does not hold
 * (storage/rows.ts, DELIVERY_COLUMNS) and builds the delivery's record from the entry and
 * those. The delivery must still be exactly the stored row: every task below reaches a
 * lease by another path (fresh, scheduled, retried, lapsed, released, revived, grouped,
 * reloaded after a restart of the grains, with every optional field set), and each delivered record
 * is compared with `getTask` of the committed row.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import type { NewTask } from "../../src/grains/queue/task.js";
import type { LeasedDelivery } from "../../src/grains/queue/queue-grain.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, LEASE_TTL_MS, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

const IDLE_MS = 1_000;
let dir: string;
let dataDir: DataDir;
let clock: FakeClock;
let store: TaskStore;
let host: GrainHost;

function startHost(): GrainHost {
  const started = new GrainHost({
    store, clock, random: seededRandom(7), newId: leaseIdCounter(), core: coreConfig(), idleMs: IDLE_MS,
    logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(), hooks: { onEvents: () => undefined },
  });
  started.link({ onReady: () => undefined, isPinned: () => false, onReminder: (q) => void started.get(q) });
  started.start();
  return started;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-activated-"));
  dataDir = openDataDir({ dir, synchronous: "normal" });
  clock = new FakeClock();
  store = new TaskStore(dataDir.db, { deadRetentionMs: 86_400_000 });
  host = startHost();
});

afterEach(() => {
  host.stop();
  dataDir.close();
  rmSync(dir, { recursive: true, force: true });
});

async function enqueue(tasks: NewTask[]): Promise<void> {
  for (const outcome of host.get("q").enqueue(tasks, false)) if (!outcome.ok) throw outcome.error;
  await dataDir.db.committed();
}

/** Leases up to `max` deliveries and checks every delivered record against its committed row. */
async function leaseAndCompare(max = 10, batchTypes: ReadonlySet<string> = new Set()): Promise<LeasedDelivery[]> {
  const deliveries = host.get("q").lease(max, { batchTypes });
  await dataDir.db.committed();
  for (const d of deliveries) for (const t of d.tasks) expect(t).toEqual(store.getTask(t.id));
  return deliveries;
}

const rich = (overrides: Partial<NewTask> = {}): NewTask => newTask({
  queue: "q", metadata: { tenant: "t1", trace: "abc" }, contentType: "application/json", priority: 7, maxRetry: 5,
  timeoutMs: 30_000, deadlineAtMs: clock.nowMs() + 3_600_000, expiresAtMs: clock.nowMs() + 600_000,
  uniqueKey: "u1", uniqueTtlMs: 120_000, concurrencyKey: "k1", retentionMs: 3_600_000, backoffBaseMs: 10, backoffMaxMs: 20,
  ...overrides,
});

describe("an activated task's delivery is its stored row", () => {
  it("fresh tasks, plain and with every optional field set", async () => {
    await enqueue([newTask({ queue: "q" }), rich(), rich({ uniqueKey: "u2", concurrencyKey: "k2", payload: new Uint8Array(0) })]);
    expect((await leaseAndCompare()).length).toBe(3);
  });

  it("a scheduled task once promoted", async () => {
    await enqueue([rich({ processAtMs: clock.nowMs() + 5_000 })]);
    clock.advance(5_000);
    await dataDir.db.committed();
    expect((await leaseAndCompare()).length).toBe(1);
  });

  it("a retried task (retried, ready time, last error) and a released one", async () => {
    await enqueue([rich(), rich({ uniqueKey: "u2", concurrencyKey: "k2" })]);
    const [a, b] = await leaseAndCompare();
    host.get("q").settle([
      { leaseId: a!.leaseId, taskId: a!.tasks[0]!.id, outcome: "retry", error: "boom" },
      { leaseId: b!.leaseId, taskId: b!.tasks[0]!.id, outcome: "released" },
    ]);
    await dataDir.db.committed();
    clock.advance(1_000);
    const again = await leaseAndCompare();
    expect(again.map((d) => d.tasks[0]!.retried).sort()).toEqual([0, 1]);
    expect(again.some((d) => d.tasks[0]!.lastError === "boom")).toBe(true);
  });

  it("a task whose lease lapsed", async () => {
    await enqueue([rich()]);
    await leaseAndCompare();
    clock.advance(LEASE_TTL_MS + 1);
    await dataDir.db.committed();
    expect((await leaseAndCompare()).length).toBe(1);
  });

  it("revived tasks keep their history (last error, cancel reason)", async () => {
    const dead = rich();
    const cancelled = newTask({ queue: "q" });
    await enqueue([dead, cancelled]);
    const [a] = await leaseAndCompare(1);
    host.get("q").settle([{ leaseId: a!.leaseId, taskId: a!.tasks[0]!.id, outcome: "skip_retry", error: "fatal" }]);
    expect(host.get("q").act(cancelled.id, "cancel")).toBeNull();
    await dataDir.db.committed();
    for (const t of [dead, cancelled]) expect(host.get("q").act(t.id, "retry")).toBeNull();
    await dataDir.db.committed();
    const revived = await leaseAndCompare();
    expect(revived.map((d) => d.tasks[0]!.id).sort()).toEqual([dead.id, cancelled.id].sort());
    expect(revived.find((d) => d.tasks[0]!.id === dead.id)!.tasks[0]!.lastError).toBe("fatal");
    expect(revived.find((d) => d.tasks[0]!.id === cancelled.id)!.tasks[0]!.cancelReason).toBe("OPERATOR");
  });

  it("a fired group's members", async () => {
    host.get("q").setGroupConfig("g", { maxSize: 3, maxDelayMs: 3_600_000, graceMs: 3_600_000 });
    await enqueue(Array.from({ length: 3 }, () => rich({ type: "digest", group: "g", uniqueKey: "", concurrencyKey: "" })));
    const [delivery] = await leaseAndCompare(10, new Set(["digest"]));
    expect(delivery!.tasks.length).toBe(3);
  });

  it("tasks loaded from the rows after passivation (packed and not)", async () => {
    await enqueue([newTask({ queue: "q" }), rich()]);
    const [first] = await leaseAndCompare(1);
    host.get("q").settle([{ leaseId: first!.leaseId, taskId: first!.tasks[0]!.id, outcome: "retry", error: "again" }]);
    await dataDir.db.committed();
    host.stop();
    host = startHost();
    clock.advance(1_000);
    expect((await leaseAndCompare()).length).toBe(2);
  });
});
