/**
 * The grain runtime in one process, on a real SQLite file and a fake clock: QueueGrain
 * persisting its core's decisions through TaskStore, GrainHost passivating and waking
 * grains, LeaseBroker parking, bounding and weighting lease calls, and AdminQueries
 * reading what they stored. No gRPC, no sleeps: time moves when the test says so.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { seededRandom } from "../../src/base/random.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { LeaseBroker, type LeaseCall } from "../../src/grains/runtime/lease-broker.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import type { CoreEvent } from "../../src/grains/queue/effects.js";
import type { NewTask } from "../../src/grains/queue/task.js";
import { NO_BATCHES } from "../../src/grains/queue/ready-queues.js";
import { AdminQueries } from "../../src/storage/admin-queries.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { coreConfig, LEASE_TTL_MS, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

const IDLE_MS = 1_000;
const DEAD_RETENTION_MS = 7 * 86_400_000;
const WAITERS_MAX = 2;

interface Runtime {
  dir: string;
  dataDir: DataDir;
  clock: FakeClock;
  store: TaskStore;
  queries: AdminQueries;
  host: GrainHost;
  broker: LeaseBroker;
  lifecycle: string[];
  events: CoreEvent[];
}

let rt: Runtime;

/** The node's runtime wiring (see startGrainRuntime in src/server/grain-runtime.ts), minus the router. */
function startRuntime(brokerSeed = 11): Runtime {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-runtime-"));
  const dataDir = openDataDir({ dir, synchronous: "normal" });
  const clock = new FakeClock();
  const store = new TaskStore(dataDir.db, { deadRetentionMs: DEAD_RETENTION_MS });
  const lifecycle: string[] = [];
  const events: CoreEvent[] = [];
  const host = new GrainHost({
    store, clock, random: seededRandom(7), newId: leaseIdCounter(), core: coreConfig(), idleMs: IDLE_MS,
    logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(),
    hooks: { onEvents: (_queue, e) => events.push(...e) },
    onLifecycle: (queue, event) => lifecycle.push(`${queue}:${event}`),
  });
  const broker = new LeaseBroker({
    grainOf: (q) => host.get(q), committed: () => dataDir.db.committed(), clock, random: seededRandom(brokerSeed),
    waitersMax: WAITERS_MAX,
  });
  host.link({ onReady: (q) => broker.onReady(q), isPinned: (q) => broker.isPinned(q), onReminder: (q) => void host.get(q) });
  host.start();
  return { dir, dataDir, clock, store, queries: new AdminQueries(dataDir.db), host, broker, lifecycle, events };
}

beforeEach(() => {
  rt = startRuntime();
});

afterEach(() => {
  rt.host.stop();
  rt.dataDir.close();
  rmSync(rt.dir, { recursive: true, force: true });
});

const task = (queue: string, overrides: Partial<NewTask> = {}): NewTask => newTask({ queue, ...overrides });

async function enqueue(queue: string, tasks: NewTask[]): Promise<void> {
  for (const outcome of rt.host.get(queue).enqueue(tasks, false)) if (!outcome.ok) throw outcome.error;
  await rt.dataDir.db.committed();
}

const call = (queues: Array<[string, number]>, overrides: Partial<LeaseCall> = {}): LeaseCall => ({
  workerId: "w1", queues: queues.map(([name, weight]) => ({ name, weight })), caps: NO_BATCHES, max: 1, waitMs: 0, ...overrides,
});

describe("QueueGrain on a real TaskStore", () => {
  it("stores each step of a task's life, and a fresh grain loads only what is unfinished", async () => {
    const [done, waiting] = [task("q"), task("q")];
    await enqueue("q", [done, waiting]);
    expect(rt.store.getTask(done.id)).toMatchObject({ state: "pending", queue: "q", type: done.type });

    const grain = rt.host.get("q");
    const [delivery] = grain.lease(1);
    expect(delivery!.tasks.map((t) => t.id)).toEqual([done.id]);
    await rt.dataDir.db.committed();
    expect(rt.store.getTask(done.id)).toMatchObject({ state: "active", leaseId: delivery!.leaseId });

    rt.clock.advance(250);
    const result = new TextEncoder().encode("ok");
    expect(grain.settle([{ leaseId: delivery!.leaseId, taskId: done.id, outcome: "success", result }])).toEqual([null]);
    await rt.dataDir.db.committed();
    const stored = rt.store.getTask(done.id)!;
    expect(stored).toMatchObject({ state: "completed", leaseId: "", finishedAtMs: rt.clock.nowMs() });
    expect(new TextDecoder().decode(stored.result)).toBe("ok");
    expect(rt.events.map((e) => e.kind)).toContain("settled");

    rt.host.deactivate("q", "idle");
    expect(rt.host.get("q").stats().unfinished).toBe(1);
    expect(rt.host.get("q").lease(5).flatMap((d) => d.tasks.map((t) => t.id))).toEqual([waiting.id]);
  });

  it("keeps a completed task for its retention and a dead one for the dead-task retention, then the janitor's purge deletes each", async () => {
    const completed = task("q", { retentionMs: 60_000 });
    const archived = task("q", { retentionMs: 60_000 });
    await enqueue("q", [completed, archived]);
    const grain = rt.host.get("q");
    const [delivery] = grain.lease(1);
    grain.settle([{ leaseId: delivery!.leaseId, taskId: completed.id, outcome: "success" }]);
    expect(grain.act(archived.id, "archive")).toBeNull();
    await rt.dataDir.db.committed();
    const finishedAtMs = rt.clock.nowMs();

    expect(rt.queries.purgeFinished(finishedAtMs + 60_000 - 1, 100)).toBe(0);
    expect(rt.queries.purgeFinished(finishedAtMs + 60_000, 100)).toBe(1);
    expect(rt.store.getTask(completed.id)).toBeUndefined();
    // The task's own retention does not apply to a dead task: it is kept for inspection.
    expect(rt.queries.purgeFinished(finishedAtMs + DEAD_RETENTION_MS - 1, 100)).toBe(0);
    expect(rt.store.getTask(archived.id)).toMatchObject({ state: "archived" });
    expect(rt.queries.purgeFinished(finishedAtMs + DEAD_RETENTION_MS, 100)).toBe(1);
    expect(rt.store.getTask(archived.id)).toBeUndefined();
  });

  it("a turn whose write fails is undone alone and deactivates the grain; the next activation rebuilds from disk", async () => {
    const [a, b] = [task("q"), task("q")];
    await enqueue("q", [a, b]);
    rt.dataDir.db.sqlite.exec(`CREATE TRIGGER refuse_activation BEFORE UPDATE OF state ON tasks
      WHEN NEW.state = 'active' BEGIN SELECT RAISE(ABORT, 'activation refused'); END`);
    const other = task("other");
    await enqueue("other", [other]);

    const refused = (() => {
      try {
        rt.host.get("q").lease(2);
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(ConveyorError);
    expect(refused).toMatchObject({ code: "INVALID_ARGUMENT", reason: "STORAGE_REJECTED" });
    expect(rt.host.peek("q")).toBeUndefined();
    expect(rt.lifecycle).toContain("q:failed");
    expect(rt.host.peek("other")).toBeDefined(); // the neighbour grain is untouched
    await rt.dataDir.db.committed();
    expect([rt.store.getTask(a.id)!.state, rt.store.getTask(b.id)!.state]).toEqual(["pending", "pending"]);

    rt.dataDir.db.sqlite.exec("DROP TRIGGER refuse_activation");
    const ids = rt.host.get("q").lease(2).flatMap((d) => d.tasks.map((t) => t.id));
    expect(ids).toEqual([a.id, b.id]);
  });

  it("persists a pause through the turn and loads it on the next activation", async () => {
    await enqueue("q", [task("q")]);
    rt.host.get("q").setPaused(true);
    await rt.dataDir.db.committed();
    rt.host.deactivate("q", "idle");
    expect(rt.host.get("q").paused).toBe(true);
    expect(rt.host.get("q").lease(1)).toEqual([]);
    expect(rt.queries.queueSettings()).toEqual([expect.objectContaining({ name: "q", paused: true })]);
  });
});

describe("GrainHost", () => {
  it("passivates an idle grain and wakes it when its scheduled task comes due", async () => {
    const later = task("q", { processAtMs: rt.clock.nowMs() + 5_000 });
    await enqueue("q", [later]);
    expect(rt.store.getTask(later.id)!.state).toBe("scheduled");

    rt.clock.advance(IDLE_MS * 2);
    expect(rt.host.peek("q")).toBeUndefined();
    expect(rt.lifecycle).toEqual(["q:activated", "q:idle"]);

    rt.clock.advance(5_000 - IDLE_MS * 2); // to the task's due time, where the reminder fires
    expect(rt.lifecycle).toEqual(["q:activated", "q:idle", "q:activated"]);
    await rt.dataDir.db.committed();
    expect(rt.store.getTask(later.id)!.state).toBe("pending");
  });

  it("keeps a grain with a parked lease call in memory, and the call gets the next task", async () => {
    const parked = rt.broker.lease(call([["q", 1]], { waitMs: 60_000 }));
    rt.clock.advance(IDLE_MS * 5);
    expect(rt.host.peek("q")).toBeDefined();
    const t = task("q");
    await enqueue("q", [t]);
    const deliveries = await parked;
    expect(deliveries.flatMap((d) => d.tasks.map((x) => x.id))).toEqual([t.id]);
    rt.clock.advance(IDLE_MS * 2);
    expect(rt.host.peek("q")).toBeUndefined(); // unpinned once served
  });

  it("a partition that starts moving ends the calls parked on its queues at once, marked relocated; others stay parked", async () => {
    const hints: string[] = [];
    const moving = rt.broker.lease(call([["moving-q", 1], ["other-q", 1]], { waitMs: 60_000, onRelocated: () => hints.push("a") }));
    const staying = rt.broker.lease(call([["other-q", 1]], { waitMs: 60_000, onRelocated: () => hints.push("b") }));
    expect(rt.broker.parked).toBe(2);
    rt.broker.releaseQueues((queue) => queue === "moving-q");
    expect(await moving).toEqual([]);
    expect(hints).toEqual(["a"]);
    expect(rt.broker.parked).toBe(1);
    // The call still parked gets the next task of its queue, unmarked.
    const t = task("other-q");
    await enqueue("other-q", [t]);
    expect((await staying).flatMap((d) => d.tasks.map((x) => x.id))).toEqual([t.id]);
    expect(hints).toEqual(["a"]);
  });

  it("refuses new activations once stopped", () => {
    rt.host.stop();
    expect(() => rt.host.get("q")).toThrow(expect.objectContaining({ reason: "NODE_STOPPING" }));
  });
});

describe("Groups on the grain's timer", () => {
  const batchCall = (overrides: Partial<LeaseCall> = {}) => call([["q", 1]], { caps: { batchTypes: new Set(["digest"]) }, max: 10, ...overrides });
  const grouped = (n: number) => Array.from({ length: n }, () => task("q", { type: "digest", group: "g" }));

  it("a parked batch Lease call gets a group in the turn its last member arrives, with no time passing", async () => {
    rt.host.get("q").setGroupConfig("g", { maxSize: 3, maxDelayMs: 3_600_000, graceMs: 3_600_000 });
    const parked = rt.broker.lease(batchCall({ waitMs: 60_000 }));
    const members = grouped(3);
    await enqueue("q", members);
    const [delivery] = await parked;
    expect(delivery).toMatchObject({ batch: true, group: "g" });
    expect(delivery!.tasks.map((t) => t.id)).toEqual(members.map((m) => m.id));
  });

  it("fires at exactly the max delay, even from a passivated grain (its reminder is the deadline)", async () => {
    rt.host.get("q").setGroupConfig("g", { maxSize: 100, maxDelayMs: 5_000, graceMs: 3_600_000 });
    const [member] = grouped(1);
    await enqueue("q", [member!]);
    rt.clock.advance(IDLE_MS * 2);
    expect(rt.host.peek("q")).toBeUndefined(); // nothing but the deadline wakes it
    rt.clock.advance(5_000 - IDLE_MS * 2 - 1);
    await rt.dataDir.db.committed();
    expect(rt.store.getTask(member!.id)!.state).toBe("aggregating");
    rt.clock.advance(1);
    await rt.dataDir.db.committed();
    expect(rt.store.getTask(member!.id)!.state).toBe("pending");
    expect(rt.lifecycle).toEqual(["q:activated", "q:idle", "q:activated"]);
  });
});

describe("LeaseBroker", () => {
  /** Leases one task at a time `calls` times from queues a and b and counts where each came from. */
  async function firstChoices(weights: { a: number; b: number }, calls: number): Promise<{ a: number; b: number }> {
    await enqueue("a", Array.from({ length: calls }, () => task("a")));
    await enqueue("b", Array.from({ length: calls }, () => task("b")));
    const counts = { a: 0, b: 0 };
    for (let i = 0; i < calls; i++) {
      const [delivery] = await rt.broker.lease(call([["a", weights.a], ["b", weights.b]]));
      counts[delivery!.queue as "a" | "b"] += 1;
    }
    return counts;
  }

  it("tries a queue of weight 6 first about six times as often as one of weight 1", async () => {
    const counts = await firstChoices({ a: 6, b: 1 }, 700);
    // Expected 600 of 700 (6/7); the bound is more than four standard deviations (9.3) wide.
    expect(Math.abs(counts.a - 600)).toBeLessThan(40);
  });

  it("control: equal weights split evenly", async () => {
    const counts = await firstChoices({ a: 1, b: 1 }, 700);
    expect(Math.abs(counts.a - 350)).toBeLessThan(55);
  });

  it("starves no queue, however light", async () => {
    const counts = await firstChoices({ a: 100, b: 1 }, 1_000);
    expect(counts.b).toBeGreaterThan(0);
    expect(counts.a).toBeGreaterThan(counts.b * 30);
  });

  it("refuses a lease call beyond its waiter bound with WAITERS_FULL, and the parked calls are unaffected", async () => {
    const first = rt.broker.lease(call([["empty", 1]], { workerId: "w1", waitMs: 30_000 }));
    const second = rt.broker.lease(call([["empty", 1]], { workerId: "w2", waitMs: 10_000 }));
    expect(rt.broker.parked).toBe(WAITERS_MAX);
    await expect(rt.broker.lease(call([["empty", 1]], { workerId: "w3", waitMs: 10_000 }))).rejects.toMatchObject({
      code: "RESOURCE_EXHAUSTED", reason: "WAITERS_FULL",
    });
    expect(rt.broker.parked).toBe(WAITERS_MAX);

    const t = task("empty");
    await enqueue("empty", [t]);
    expect((await first).flatMap((d) => d.tasks.map((x) => x.id))).toEqual([t.id]);
    rt.clock.advance(10_000);
    expect(await second).toEqual([]); // its wait bound ended it, empty
    expect(rt.broker.parked).toBe(0);
  });

  it("hands out no delivery whose lease ran out while it waited to be durable (its lapse requeues the task for the next call)", async () => {
    /** Commits that complete only when the test says (a changelog without a leader). */
    const pending: Array<() => void> = [];
    const held = new LeaseBroker({
      grainOf: (q) => rt.host.get(q), committed: () => new Promise<void>((resolve) => pending.push(resolve)), clock: rt.clock, random: seededRandom(3),
      waitersMax: WAITERS_MAX,
    });
    const [a, b] = [task("slow"), task("slow")];
    await enqueue("slow", [a, b]);
    const settle = () => pending.splice(0).forEach((resolve) => resolve());
    /** Until the call waits for its commit (its lease taken). */
    const leased = async () => {
      while (pending.length === 0) await new Promise((resolve) => setImmediate(resolve));
    };

    // Durable within the lease: handed out.
    const inTime = held.lease(call([["slow", 1]]));
    await leased();
    rt.clock.advance(LEASE_TTL_MS - 1);
    settle();
    expect((await inTime).map((d) => d.tasks[0]!.id)).toEqual([a.id]);

    // Durable only after the lease ran out: not handed out; the lapse puts the task back.
    const late = held.lease(call([["slow", 1]]));
    await leased();
    rt.clock.advance(LEASE_TTL_MS);
    settle();
    expect(await late).toEqual([]);
    await rt.dataDir.db.committed();
    expect(rt.store.getTask(b.id)?.state, "b's lease lapsed: it waits to run again").not.toBe("active");
  });

  it("gives a draining worker nothing and ends its parked calls empty", async () => {
    const parked = rt.broker.lease(call([["q", 1]], { workerId: "leaving", waitMs: 30_000 }));
    rt.broker.drain("leaving", 5_000);
    expect(await parked).toEqual([]);
    await enqueue("q", [task("q")]);
    expect(await rt.broker.lease(call([["q", 1]], { workerId: "leaving" }))).toEqual([]);
    expect(await rt.broker.lease(call([["q", 1]], { workerId: "staying" }))).toHaveLength(1);
  });
});

describe("AdminQueries", () => {
  it("counts every queue's tasks by state from storage, without activating a grain", async () => {
    await enqueue("a", [task("a"), task("a"), task("a", { processAtMs: rt.clock.nowMs() + 60_000 })]);
    await enqueue("b", [task("b")]);
    const [delivery] = rt.host.get("a").lease(1);
    rt.host.get("a").settle([{ leaseId: delivery!.leaseId, taskId: delivery!.taskIds[0]!, outcome: "success" }]);
    await rt.dataDir.db.committed();
    rt.host.deactivateAll("idle");

    const summaries = rt.queries.listQueues();
    expect(rt.host.activeQueues()).toEqual([]);
    expect(summaries.map((s) => s.name)).toEqual(["a", "b"]);
    expect(summaries[0]!.counts).toMatchObject({ pending: 1, scheduled: 1, completed: 1, active: 0 });
    expect(summaries[1]!.counts).toMatchObject({ pending: 1 });
    expect(rt.queries.queuesWithUnfinishedTasks().sort()).toEqual(["a", "b"]);
  });
});
