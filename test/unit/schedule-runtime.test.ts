/**
 * Schedules in the grain runtime on a real SQLite file and a fake clock: the tick's task
 * and the schedule's cursor stored together, a passivated grain woken by its reminder at
 * the next tick, and a restart that neither repeats a tick nor enqueues every missed one.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import type { ScheduleSpec } from "../../src/grains/queue/schedule.js";
import { openDataDir, type DataDir } from "../../src/storage/data-dir.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { cronCalendar } from "../../src/server/cron-calendar.js";
import { coreConfig, leaseIdCounter, newTask } from "../support/core-fixtures.js";
import { FakeClock } from "../support/fake-clock.js";

const IDLE_MS = 1_000;
const Q = "periodic";

let dir: string;
let dataDir: DataDir;
let clock: FakeClock;
let store: TaskStore;
let host: GrainHost;
let lifecycle: string[];

function startHost(): GrainHost {
  const h = new GrainHost({
    store, clock, random: seededRandom(7), newId: leaseIdCounter(), core: coreConfig(), idleMs: IDLE_MS, cron: cronCalendar,
    logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(), hooks: { onEvents: () => {} },
    onLifecycle: (queue, event) => lifecycle.push(`${queue}:${event}`),
  });
  h.link({ onReady: () => {}, isPinned: () => false, onReminder: (q) => void h.get(q) });
  h.start();
  return h;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-schedules-"));
  dataDir = openDataDir({ dir, synchronous: "normal" });
  clock = new FakeClock(Date.UTC(2026, 5, 1));
  store = new TaskStore(dataDir.db, { deadRetentionMs: 86_400_000 });
  lifecycle = [];
  host = startHost();
});

afterEach(() => {
  host.stop();
  dataDir.close();
  rmSync(dir, { recursive: true, force: true });
});

function spec(name: string, everyMs: number): ScheduleSpec {
  const { id: _i, idChosen: _c, processAtMs: _p, expiresAtMs: _e, deadlineAtMs: _d, uniqueKey: _u, uniqueTtlMs: _t, ...task } = newTask({ queue: Q, type: "beat" });
  return { name, task: { ...task, processInMs: 0, expiresInMs: 0 }, cadence: { kind: "interval", everyMs, anchorMs: 0 }, missed: "latest", skipIfRunning: false };
}

/** Task ids of the queue, in insertion order. */
const taskIds = () => (dataDir.db.sqlite.prepare("SELECT id FROM tasks WHERE queue = ? ORDER BY rowid").all(Q) as Array<{ id: string }>).map((r) => r.id);

describe("schedules in the grain runtime", () => {
  it("stores each tick's task with the schedule's cursor, in the tick's turn", () => {
    const t0 = clock.nowMs();
    host.get(Q).schedule({ kind: "set", spec: spec("s", 1_000) });
    clock.advance(3_000);
    expect(taskIds()).toEqual([1, 2, 3].map((k) => `schedule:s:${t0 + k * 1_000}`));
    const [stored] = store.schedules.list(Q);
    expect(stored).toMatchObject({ queue: Q, name: "s", lastTickAtMs: t0 + 3_000, lastTaskId: `schedule:s:${t0 + 3_000}`, lastTaskState: "pending" });
    expect(store.schedules.queuesWithSchedules()).toEqual([Q]);
  });

  it("a passivated grain is woken by its reminder at the next tick, and enqueues it once", () => {
    const t0 = clock.nowMs();
    host.get(Q).schedule({ kind: "set", spec: spec("s", 5_000) });
    clock.advance(2_000);
    expect(host.peek(Q), "passivated while idle").toBeUndefined();
    expect(lifecycle).toEqual([`${Q}:activated`, `${Q}:idle`]);
    clock.advance(3_000);
    expect(lifecycle).toEqual([`${Q}:activated`, `${Q}:idle`, `${Q}:activated`]);
    expect(taskIds()).toEqual([`schedule:s:${t0 + 5_000}`]);
    clock.advance(10_000);
    expect(taskIds()).toEqual([1, 2, 3].map((k) => `schedule:s:${t0 + k * 5_000}`));
  });

  it("after a restart, handled ticks are not enqueued again and only the latest missed tick is", () => {
    const t0 = clock.nowMs();
    host.get(Q).schedule({ kind: "set", spec: spec("s", 1_000) });
    clock.advance(2_000);
    host.stop(); // the node goes down; its timers with it
    clock.advance(30_500);
    host = startHost();
    host.get(Q); // start-up activation
    expect(taskIds()).toEqual([`schedule:s:${t0 + 1_000}`, `schedule:s:${t0 + 2_000}`, `schedule:s:${t0 + 32_000}`]);
    clock.advance(1_000);
    expect(taskIds().at(-1)).toBe(`schedule:s:${t0 + 33_000}`);
    expect(new Set(taskIds()).size).toBe(taskIds().length);
  });

  it("a cursor that fell behind meets the existing task: the tick is not enqueued twice", () => {
    const t0 = clock.nowMs();
    host.get(Q).schedule({ kind: "set", spec: spec("s", 1_000) });
    clock.advance(1_000);
    // Complete the tick's task, then move the cursor back as a restored backup could.
    dataDir.db.sqlite.prepare("UPDATE tasks SET state = 'completed' WHERE id = ?").run(`schedule:s:${t0 + 1_000}`);
    dataDir.db.sqlite.prepare("UPDATE schedules SET last_tick_at = ? WHERE name = 's'").run(t0);
    host.stop();
    host = startHost();
    host.get(Q);
    expect(taskIds()).toEqual([`schedule:s:${t0 + 1_000}`]);
    expect(store.schedules.list(Q)[0]).toMatchObject({ lastTickAtMs: t0 + 1_000, lastTaskState: "completed" });
  });
});
