/**
 * Schedules through a real node: one task per tick with no duplicates across a kill -9
 * and restart, ticks continuing through passivation (the host's reminder), the operator
 * commands, and bad input refused with the field named and nothing changed.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MissedTicks, ScheduleSchema, type Schedule } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskSpecSchema, TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
import { NodeProcess, eventually } from "../support/node-process.js";
import { connect, rejection } from "../support/sdk.js";

type Sdk = ReturnType<typeof connect>;

function schedule(queue: string, name: string, cadence: Schedule["cadence"], extra: MessageInitShape<typeof ScheduleSchema> = {}): Schedule {
  return create(ScheduleSchema, {
    name, cadence, task: create(TaskSpecSchema, { type: "tick", queue, payload: new TextEncoder().encode("{}"), contentType: "application/json" }),
    ...extra,
  });
}

const everySecond = { case: "intervalMs" as const, value: 1_000n };

/** The tick instants of a schedule's tasks in a queue (ids "schedule:<name>:<tick ms>"), ascending. */
async function ticksOf(sdk: Sdk, queue: string, name: string): Promise<number[]> {
  const res = await sdk.admin.listTasks({ queue, pageSize: 1000 });
  const prefix = `schedule:${name}:`;
  for (const t of res.tasks) expect(t.id.startsWith(prefix), `task ${t.id} of queue ${queue}`).toBe(true);
  return res.tasks.map((t) => Number(t.id.slice(prefix.length))).sort((a, b) => a - b);
}

const atLeast = (sdk: Sdk, queue: string, name: string, n: number) =>
  eventually(`${n} tasks of schedule ${name}`, async () => {
    const ticks = await ticksOf(sdk, queue, name);
    return ticks.length >= n ? ticks : undefined;
  }, 15_000);

describe("schedules on a real node", () => {
  it("a schedule every second enqueues one task per tick, with no duplicates across a kill -9 and restart", async () => {
    let node = await NodeProcess.start();
    let sdk = connect(node);
    const queue = "every-second";
    try {
      const set = await sdk.admin.setSchedule({ schedule: schedule(queue, "s", everySecond) });
      const anchorMs = Number(set.schedule!.createdAtMs);
      // The first tick is one interval after the schedule was set (a later one if the node was slow to answer).
      const firstTickMs = Number(set.schedule!.nextTickAtMs);
      expect(firstTickMs > anchorMs && (firstTickMs - anchorMs) % 1_000 === 0, `next tick ${firstTickMs}, set at ${anchorMs}`).toBe(true);
      const before = await atLeast(sdk, queue, "s", 3);
      await node.kill();
      const killedAtMs = Date.now();
      await sdk.close();
      // The node stays down across at least two ticks (the fault itself, not a wait for
      // something): all of them are missed, and only the latest may be enqueued.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      // Before the restart, not after: once up, the node enqueues live ticks again, and a
      // slow start (a loaded machine) would otherwise count one of them as missed.
      const restartedAtMs = Date.now();
      node = await node.restart();
      sdk = connect(node);
      const all = await atLeast(sdk, queue, "s", (await ticksOf(sdk, queue, "s")).length + 3);

      // One task per tick: every id is a distinct tick instant on the schedule's grid.
      expect(new Set(all).size).toBe(all.length);
      for (const tick of all) expect((tick - anchorMs) % 1_000, `tick ${tick}`).toBe(0);
      // Nothing acknowledged before the crash was lost or enqueued again.
      expect(all.slice(0, before.length)).toEqual(before);
      // Missed while down (the default policy): only the latest missed tick was enqueued.
      // (Ticks between the restart's start and the node's first turn are missed too; the
      // latest of them may fall after restartedAtMs, so at most one falls in this window.)
      const missed = all.filter((t) => t > killedAtMs && t <= restartedAtMs);
      expect(restartedAtMs - killedAtMs).toBeGreaterThanOrEqual(2_000);
      expect(missed.length, `ticks between the kill at ${killedAtMs} and the restart at ${restartedAtMs}: ${missed}`).toBeLessThanOrEqual(1);
      const [listed] = (await sdk.admin.listSchedules({ queue })).schedules;
      expect(listed?.lastTaskId).toMatch(/^schedule:s:\d+$/);
      expect(Number(listed?.lastTickAtMs)).toBeGreaterThanOrEqual(all.at(-1)!);
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("a passivated grain with a schedule is woken at its next tick", async () => {
    const node = await NodeProcess.start({ settings: { grain_idle_timeout: "150ms" } });
    const sdk = connect(node);
    const queue = "passivating";
    try {
      await sdk.admin.setSchedule({ schedule: schedule(queue, "p", everySecond) });
      await atLeast(sdk, queue, "p", 3);
      const metrics = await node.metrics();
      const idle = Number(/conveyor_grain_lifecycle_total\{queue="passivating",event="idle"\} (\d+)/.exec(metrics)?.[1] ?? 0);
      expect(idle, "passivations between ticks").toBeGreaterThanOrEqual(2);
      const enqueued = Number(/conveyor_schedule_ticks_total\{queue="passivating",outcome="enqueued"\} (\d+)/.exec(metrics)?.[1] ?? 0);
      expect(enqueued, "ticks enqueued").toBeGreaterThanOrEqual(3);
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("pause, resume, run-now and delete", async () => {
    const node = await NodeProcess.start();
    const sdk = connect(node);
    const queue = "ops";
    try {
      await sdk.admin.setSchedule({
        schedule: schedule(queue, "nightly", { case: "cron", value: "0 3 * * *" }, { timeZone: "Europe/Berlin", missedTicks: MissedTicks.SKIP, skipIfRunning: true }),
      });
      const paused = await sdk.admin.pauseSchedule({ queue, name: "nightly" });
      expect(paused.schedule).toMatchObject({ paused: true, nextTickAtMs: 0n });
      const resumed = await sdk.admin.resumeSchedule({ queue, name: "nightly" });
      expect(resumed.schedule?.paused).toBe(false);
      expect(new Date(Number(resumed.schedule!.nextTickAtMs)).getUTCMinutes()).toBe(0);
      const run = await sdk.admin.runScheduleNow({ queue, name: "nightly" });
      expect(run.taskId).toMatch(/^schedule:nightly:now:\d+$/);
      expect((await sdk.client.getTask(run.taskId)).type).toBe("tick");
      const [listed] = (await sdk.admin.listSchedules({ queue })).schedules;
      expect(listed).toMatchObject({
        name: "nightly", timeZone: "Europe/Berlin", missedTicks: MissedTicks.SKIP, skipIfRunning: true,
        lastTaskId: run.taskId, lastTaskState: TaskState.PENDING, cadence: { case: "cron", value: "0 3 * * *" },
      });
      await sdk.admin.deleteSchedule({ queue, name: "nightly" });
      expect((await sdk.admin.listSchedules({ queue })).schedules).toEqual([]);
      const gone = await rejection(sdk.admin.deleteSchedule({ queue, name: "nightly" }));
      expect(gone).toMatchObject({ code: "NOT_FOUND", reason: "SCHEDULE_NOT_FOUND" });
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("bad cron expressions, unknown zones and refused task fields are INVALID_ARGUMENT naming the field; nothing changes", async () => {
    const node = await NodeProcess.start();
    const sdk = connect(node);
    const queue = "bad";
    try {
      const cases: Array<[Schedule, string]> = [
        [schedule(queue, "b", { case: "cron", value: "61 * * * *" }), "schedule.cron"],
        [schedule(queue, "b", { case: "cron", value: "not a cron" }), "schedule.cron"],
        [schedule(queue, "b", { case: "cron", value: "0 * * * *" }, { timeZone: "Mars/Olympus_Mons" }), "schedule.time_zone"],
        [schedule(queue, "b", { case: "intervalMs", value: 10n }), "schedule.interval_ms"],
        [schedule(queue, "b", { case: undefined }), "schedule.cron"],
        [schedule(queue, "bad name!", everySecond), "schedule.name"],
        [{ ...schedule(queue, "b", everySecond), task: create(TaskSpecSchema, { type: "tick", queue, taskId: "x" }) }, "schedule.task.task_id"],
        [{ ...schedule(queue, "b", everySecond), task: create(TaskSpecSchema, { type: "", queue }) }, "schedule.task.type"],
      ];
      for (const [s, field] of cases) {
        const error = await rejection(sdk.admin.setSchedule({ schedule: s }));
        expect({ code: error.code, reason: error.reason, field: error.field }, error.message).toEqual({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field });
      }
      expect((await sdk.admin.listSchedules({})).schedules).toEqual([]);
      expect((await sdk.admin.listQueues({})).queues.map((q) => q.name)).not.toContain(queue);
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });
});
