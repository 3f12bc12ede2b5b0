/**
 * The tick logic of schedules in the pure core, with hand-advanced time: each tick
 * enqueued once with its derived id, missed ticks on activation per policy, the overlap
 * guard, pause/resume, and daylight-saving transitions through the real cron library.
 */
import { describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import { SCHEDULES_PER_QUEUE_MAX } from "../../src/base/limits.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import { QueueCore, type KnownIds } from "../../src/grains/queue/queue-core.js";
import { tickTaskId, type Cadence, type ScheduleSpec, type ScheduleState, type TaskTemplate } from "../../src/grains/queue/schedule.js";
import { MISSED_TICK_GRACE_MS, type ScheduleAnswer } from "../../src/grains/queue/schedules.js";
import { cronCalendar } from "../../src/server/cron-calendar.js";
import { NO_KNOWN, QUEUE, coreConfig, expectConveyorError, inserts, leaseIdCounter, leaseOne, newTask, settleOk } from "../support/core-fixtures.js";

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);

function makeCore(): QueueCore {
  return new QueueCore(QUEUE, coreConfig(), { random: seededRandom(1), newId: leaseIdCounter(), cron: cronCalendar });
}

function template(): TaskTemplate {
  const { id: _id, idChosen: _c, processAtMs: _p, expiresAtMs: _e, deadlineAtMs: _d, uniqueKey: _u, uniqueTtlMs: _t, ...rest } = newTask({ type: "report" });
  return { ...rest, processInMs: 0, expiresInMs: 0 };
}

function spec(name: string, cadence: Cadence, extra: Partial<ScheduleSpec> = {}): ScheduleSpec {
  return { name, task: template(), cadence, missed: "latest", skipIfRunning: false, ...extra };
}

const every = (ms: number, anchorMs = T0): Cadence => ({ kind: "interval", everyMs: ms, anchorMs });
const cron = (expression: string, timeZone = ""): Cadence => ({ kind: "cron", expression, timeZone });

function set(core: QueueCore, s: ScheduleSpec, nowMs: number): ScheduleState {
  const answer = core.schedule({ kind: "set", spec: s }, nowMs, NO_KNOWN) as ScheduleAnswer;
  return answer.schedule!;
}

/** What the grain's timer does at `nowMs` (the shell looks up `known` ids first). */
function fireAt(core: QueueCore, nowMs: number, known: KnownIds = NO_KNOWN): Effect[] {
  core.tick(nowMs);
  core.fireSchedules(nowMs, known);
  return core.drain().effects;
}

/** Follows the grain's timer `n` times; the instants it woke at and the ids it enqueued. */
function followTimer(core: QueueCore, n: number): { wakes: number[]; enqueued: string[] } {
  const wakes: number[] = [];
  const enqueued: string[] = [];
  for (let i = 0; i < n; i++) {
    const at = core.nextWakeAtMs()!;
    wakes.push(at);
    enqueued.push(...inserts(fireAt(core, at)).map((e) => e.task.id));
  }
  return { wakes, enqueued };
}

/** A fresh core loaded with `core`'s schedules as stored (what activation after a restart does). */
function restart(core: QueueCore, nowMs: number): QueueCore {
  const fresh = makeCore();
  fresh.load(core.snapshot(), { paused: false, schedules: core.listSchedules() }, nowMs);
  return fresh;
}

describe("schedules: one enqueue per tick", () => {
  it("an interval schedule enqueues each tick once, with an id derived from (schedule, tick), and stores its cursor in the same turn", () => {
    const core = makeCore();
    set(core, spec("s", every(1_000)), T0);
    core.drain();
    expect(core.nextWakeAtMs()).toBe(T0 + 1_000);
    const effects = fireAt(core, T0 + 1_003);
    expect(inserts(effects).map((e) => e.task.id)).toEqual([tickTaskId("s", T0 + 1_000)]);
    expect(effects).toContainEqual({ kind: "tickSchedule", name: "s", lastTickAtMs: T0 + 1_000, lastTaskId: tickTaskId("s", T0 + 1_000) });
    // The same instant again (a second timer, another queue call's tick): nothing new.
    expect(fireAt(core, T0 + 1_003)).toEqual([]);
    expect(core.nextWakeAtMs()).toBe(T0 + 2_000);
    expect(followTimer(core, 3).enqueued).toEqual([2, 3, 4].map((k) => tickTaskId("s", T0 + k * 1_000)));
  });

  it("a tick whose task already exists (finished, so only storage knows it) is not enqueued again", () => {
    const core = makeCore();
    set(core, spec("s", every(1_000)), T0);
    core.drain();
    const id = tickTaskId("s", T0 + 1_000);
    const effects = fireAt(core, T0 + 1_000, new Map([[id, { queue: QUEUE, state: "completed" as const }]]));
    expect(inserts(effects)).toEqual([]);
    expect(effects).toContainEqual({ kind: "tickSchedule", name: "s", lastTickAtMs: T0 + 1_000, lastTaskId: id });
  });

  it("a cron schedule with seconds fires every second; run-now enqueues at once without moving the cursor", () => {
    const core = makeCore();
    set(core, spec("c", cron("* * * * * *")), T0 + 500);
    core.drain();
    expect(followTimer(core, 2).wakes).toEqual([T0 + 1_000, T0 + 2_000]);
    const answer = core.schedule({ kind: "runNow", name: "c" }, T0 + 2_100, NO_KNOWN) as ScheduleAnswer;
    expect(answer.taskId).toBe(`schedule:c:now:${T0 + 2_100}`);
    expect(answer.schedule?.lastTickAtMs).toBe(T0 + 2_000);
    expect(inserts(core.drain().effects).map((e) => e.task.id)).toEqual([answer.taskId]);
  });
});

describe("schedules: missed ticks on activation", () => {
  it("'latest' (the default) enqueues only the most recent tick missed while the node was down", () => {
    const before = makeCore();
    set(before, spec("s", every(1_000)), T0);
    before.drain();
    followTimer(before, 2); // ticks at +1 s and +2 s
    const after = restart(before, T0 + 60_500); // down for about a minute
    expect(after.nextWakeAtMs()).toBe(T0 + 60_000);
    const effects = fireAt(after, T0 + 60_500);
    expect(inserts(effects).map((e) => e.task.id)).toEqual([tickTaskId("s", T0 + 60_000)]);
    expect(after.nextWakeAtMs()).toBe(T0 + 61_000);
  });

  it("'skip' drops a tick more than the grace late and waits for the next one; a tick within the grace still runs", () => {
    const before = makeCore();
    set(before, spec("s", every(10_000), { missed: "skip" }), T0);
    before.drain();
    const late = restart(before, T0 + 30_000 + MISSED_TICK_GRACE_MS + 1);
    const effects = fireAt(late, T0 + 30_000 + MISSED_TICK_GRACE_MS + 1);
    expect(inserts(effects)).toEqual([]);
    expect(effects).toContainEqual(expect.objectContaining({ kind: "tickSchedule", lastTickAtMs: T0 + 30_000, lastTaskId: "" }));
    expect(late.nextWakeAtMs()).toBe(T0 + 40_000);
    const onTime = restart(before, T0 + 30_000 + MISSED_TICK_GRACE_MS);
    expect(inserts(fireAt(onTime, T0 + 30_000 + MISSED_TICK_GRACE_MS)).map((e) => e.task.id)).toEqual([tickTaskId("s", T0 + 30_000)]);
  });

  it("the cursor survives a restart: ticks handled before it are never enqueued again", () => {
    const before = makeCore();
    set(before, spec("s", every(1_000)), T0);
    before.drain();
    followTimer(before, 3);
    const after = restart(before, T0 + 3_000);
    expect(fireAt(after, T0 + 3_000)).toEqual([]);
    expect(after.nextWakeAtMs()).toBe(T0 + 4_000);
  });
});

describe("schedules: the overlap guard", () => {
  it("skips ticks while the previous task is unfinished, and enqueues again once it finished", () => {
    const core = makeCore();
    set(core, spec("s", every(1_000), { skipIfRunning: true }), T0);
    core.drain();
    expect(inserts(fireAt(core, T0 + 1_000))).toHaveLength(1);
    const plan = leaseOne(core, T0 + 1_100);
    core.drain();
    const skipped = fireAt(core, T0 + 2_000);
    expect(inserts(skipped)).toEqual([]);
    expect(skipped).toContainEqual({ kind: "tickSchedule", name: "s", lastTickAtMs: T0 + 2_000, lastTaskId: tickTaskId("s", T0 + 1_000) });
    settleOk(core, plan, T0 + 2_500);
    core.drain();
    expect(inserts(fireAt(core, T0 + 3_000)).map((e) => e.task.id)).toEqual([tickTaskId("s", T0 + 3_000)]);
  });

  it("without the guard, ticks enqueue while earlier tasks run", () => {
    const core = makeCore();
    set(core, spec("s", every(1_000)), T0);
    core.drain();
    expect(followTimer(core, 3).enqueued).toHaveLength(3);
  });
});

describe("schedules: pause, resume, delete, limits", () => {
  it("a paused schedule arms no timer and enqueues nothing; resuming does not enqueue the paused ticks", () => {
    const core = makeCore();
    core.enqueue([newTask()], NO_KNOWN, T0, false);
    set(core, spec("s", every(1_000)), T0);
    core.schedule({ kind: "pause", name: "s" }, T0 + 10, NO_KNOWN);
    core.drain();
    expect(core.nextWakeAtMs()).toBeUndefined();
    expect(fireAt(core, T0 + 5_500)).toEqual([]);
    const resumed = (core.schedule({ kind: "resume", name: "s" }, T0 + 5_500, NO_KNOWN) as ScheduleAnswer).schedule!;
    expect(resumed).toMatchObject({ paused: false, lastTickAtMs: T0 + 5_500 });
    core.drain();
    expect(fireAt(core, T0 + 5_600)).toEqual([]);
    expect(core.nextWakeAtMs()).toBe(T0 + 6_000);
  });

  it("delete removes the schedule and its timer; unknown names are SCHEDULE_NOT_FOUND", () => {
    const core = makeCore();
    set(core, spec("s", every(1_000)), T0);
    expect(core.schedule({ kind: "delete", name: "s" }, T0, NO_KNOWN)).toEqual({});
    expect(core.drain().effects).toContainEqual({ kind: "deleteSchedule", name: "s" });
    expect(core.nextWakeAtMs()).toBeUndefined();
    expectConveyorError(core.schedule({ kind: "pause", name: "s" }, T0, NO_KNOWN), "NOT_FOUND", "SCHEDULE_NOT_FOUND");
  });

  it(`a queue holds at most ${SCHEDULES_PER_QUEUE_MAX} schedules; replacing one is not a new one`, () => {
    const core = makeCore();
    for (let i = 0; i < SCHEDULES_PER_QUEUE_MAX; i++) set(core, spec(`s${i}`, every(60_000)), T0);
    expectConveyorError(core.schedule({ kind: "set", spec: spec("one-more", every(1_000)) }, T0, NO_KNOWN), "RESOURCE_EXHAUSTED", "SCHEDULES_FULL");
    expect(set(core, spec("s0", every(5_000)), T0 + 1).cadence).toEqual(every(5_000, T0 + 1));
    // The same interval again keeps its anchor: replacing the task does not shift the ticks.
    expect(set(core, spec("s0", every(5_000)), T0 + 7).cadence).toEqual(every(5_000, T0 + 1));
  });
});

describe("schedules: daylight saving (cron in Europe/Berlin, through cron-parser)", () => {
  const iso = (ms: number) => new Date(ms).toISOString();

  it("spring forward: a daily 02:30 that does not exist that night runs at 03:30 local, once", () => {
    const core = makeCore();
    set(core, spec("d", cron("30 2 * * *", "Europe/Berlin")), Date.parse("2026-03-27T12:00:00Z"));
    core.drain();
    // 02:30 CET = 01:30Z; on 29 March 02:00-03:00 is skipped: 03:30 CEST = 01:30Z; then 02:30 CEST = 00:30Z.
    expect(followTimer(core, 3).wakes.map(iso)).toEqual([
      "2026-03-28T01:30:00.000Z", "2026-03-29T01:30:00.000Z", "2026-03-30T00:30:00.000Z",
    ]);
  });

  it("fall back: a daily 02:30 that occurs twice that night runs once, at its first occurrence", () => {
    const core = makeCore();
    set(core, spec("d", cron("30 2 * * *", "Europe/Berlin")), Date.parse("2026-10-24T12:00:00Z"));
    set(core, spec("other", every(60_000, Date.parse("2026-10-24T12:00:00Z"))), Date.parse("2026-10-24T12:00:00Z"));
    core.drain();
    // The first 02:30 (CEST, 00:30Z) runs; at the second (CET, 01:30Z) the other schedule wakes the grain, and d stays quiet.
    const enqueued: string[] = [];
    for (let at = Date.parse("2026-10-25T00:00:00Z"); at <= Date.parse("2026-10-25T03:00:00Z"); at += 60_000) {
      enqueued.push(...inserts(fireAt(core, at)).map((e) => e.task.id).filter((id) => id.startsWith("schedule:d:")));
    }
    expect(enqueued).toEqual([tickTaskId("d", Date.parse("2026-10-25T00:30:00Z"))]);
  });

  it("fall back: an hourly schedule runs every real hour, both 02:00s included", () => {
    const core = makeCore();
    set(core, spec("h", cron("0 * * * *", "Europe/Berlin")), Date.parse("2026-10-24T23:30:00Z"));
    core.drain();
    expect(followTimer(core, 4).wakes.map(iso)).toEqual([
      "2026-10-25T00:00:00.000Z", "2026-10-25T01:00:00.000Z", "2026-10-25T02:00:00.000Z", "2026-10-25T03:00:00.000Z",
    ]);
  });
});
