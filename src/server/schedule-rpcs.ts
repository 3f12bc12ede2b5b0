/**
 * AdminService's schedule methods: validation and wire translation only. Commands go to
 * the queue's grain (its only writer); ListSchedules reads SQLite (operators' reads never
 * activate a grain) and computes each next tick with the grain's own arithmetic.
 *
 * A schedule's task is validated like an enqueued one (validateSpec), minus what a
 * periodic task cannot have: its id is the tick's, and absolute instants would be stale
 * by the second tick. Its type's concurrency rules are evaluated here, once, when the
 * schedule is set (the grain never sees CEL): a rule edited later applies to the
 * schedule's tasks once the schedule is set again.
 */
import { create } from "@bufbuild/protobuf";
import type { Clock } from "../base/clock.js";
import { invalidField } from "../base/errors.js";
import { SCHEDULE_INTERVAL_MIN_MS, SCHEDULE_NAME_MAX_CHARS, SCHEDULE_PAYLOAD_MAX_BYTES, formatBytes, quote } from "../base/limits.js";
import type { Router } from "../cluster/router.js";
import { upcomingTick, type Cadence, type MissedTicks, type ScheduleSpec, type TaskTemplate } from "../grains/queue/schedule.js";
import { AdminService, MissedTicks as WireMissed, ScheduleSchema, type Schedule } from "../gen/conveyor/v1/admin_service_pb.js";
import { TaskSpecSchema, TaskState as WireState, type TaskSpec } from "../gen/conveyor/v1/task_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import type { StoredSchedule } from "../storage/schedule-store.js";
import { stateToWire } from "./convert.js";
import { checkCron, checkTimeZone, cronCalendar } from "./cron-calendar.js";
import type { RuleRegistry } from "./rules/rule-registry.js";
import { checkDurationMs, checkLength, checkQueueName, DEFAULT_QUEUE, validateSpec, type TaskDefaults } from "./validate.js";

/** The AdminService methods this file implements (admin-service.ts implements the rest). */
export type ScheduleMethods = "setSchedule" | "listSchedules" | "deleteSchedule" | "pauseSchedule" | "resumeSchedule" | "runScheduleNow";

/** What the schedule methods use, and nothing else. */
export interface ScheduleRpcDeps {
  router: Pick<Router, "grainFor">;
  /** Stored schedules (the grain writes them; this only reads). */
  schedules: { list(queue?: string): StoredSchedule[] };
  rules: Pick<RuleRegistry, "evaluate">;
  taskDefaults: TaskDefaults;
  clock: Pick<Clock, "nowMs">;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Grain policy ↔ wire enum; the Record keeps every grain value mapped. */
const MISSED_TO_WIRE: Record<MissedTicks, WireMissed> = { latest: WireMissed.LATEST, skip: WireMissed.SKIP };

/** Task fields a schedule's task cannot carry, and why. */
const REFUSED_TASK_FIELDS: ReadonlyArray<[keyof TaskSpec, string, string]> = [
  ["taskId", "task_id", "a schedule's tasks get their ids from their ticks"],
  ["processAtMs", "process_at_ms", "an instant would be stale by the second tick; use process_in_ms"],
  ["deadlineAtMs", "deadline_at_ms", "an instant would be stale by the second tick"],
  ["expiresAtMs", "expires_at_ms", "an instant would be stale by the second tick; use expires_in_ms"],
  ["uniqueKey", "unique_key", "use skip_if_running to keep a schedule's tasks from overlapping"],
  ["uniqueTtlMs", "unique_ttl_ms", "use skip_if_running to keep a schedule's tasks from overlapping"],
];

/** The schedule methods of AdminService (node.ts joins them with adminService's). */
export function scheduleRpcs(ctx: ScheduleRpcDeps): Pick<UnaryImpl<typeof AdminService>, ScheduleMethods> {
  const toWire = (s: StoredSchedule): Schedule => scheduleToWire(s, ctx.clock.nowMs());

  /** The stored schedule after a command (the grain's answer lacks the last task's state). */
  const stored = (queue: string, name: string): Schedule | undefined => {
    const s = ctx.schedules.list(queue).find((x) => x.name === name);
    return s && toWire(s);
  };

  const target = (req: { queue: string; name: string }) => ({
    queue: checkQueueName(req.queue === "" ? DEFAULT_QUEUE : req.queue, "queue"),
    name: checkName(req.name, "name"),
  });

  return {
    async setSchedule(call) {
      const { queue, spec } = validateSchedule(call.request.schedule, ctx);
      await ctx.router.grainFor(queue).schedule({ kind: "set", spec });
      return { schedule: stored(queue, spec.name) };
    },
    async listSchedules(call) {
      const queue = call.request.queue === "" ? undefined : checkQueueName(call.request.queue, "queue");
      return { schedules: ctx.schedules.list(queue).map(toWire) };
    },
    async deleteSchedule(call) {
      const { queue, name } = target(call.request);
      await ctx.router.grainFor(queue).schedule({ kind: "delete", name });
      return {};
    },
    async pauseSchedule(call) {
      const { queue, name } = target(call.request);
      await ctx.router.grainFor(queue).schedule({ kind: "pause", name });
      return { schedule: stored(queue, name) };
    },
    async resumeSchedule(call) {
      const { queue, name } = target(call.request);
      await ctx.router.grainFor(queue).schedule({ kind: "resume", name });
      return { schedule: stored(queue, name) };
    },
    async runScheduleNow(call) {
      const { queue, name } = target(call.request);
      const answer = await ctx.router.grainFor(queue).schedule({ kind: "runNow", name });
      return { taskId: answer.taskId ?? "" };
    },
  };
}

function checkName(name: string, field: string): string {
  checkLength(name, field, SCHEDULE_NAME_MAX_CHARS);
  if (!NAME.test(name)) {
    throw invalidField(field, `invalid schedule name ${quote(name)}: use 1-${SCHEDULE_NAME_MAX_CHARS} letters, digits, '.', '_' or '-', starting with a letter or digit`);
  }
  return name;
}

/** A SetSchedule request's schedule as the grain takes it; every bad field is INVALID_ARGUMENT naming it. */
function validateSchedule(s: Schedule | undefined, ctx: ScheduleRpcDeps): { queue: string; spec: ScheduleSpec } {
  if (!s) throw invalidField("schedule", "missing");
  const nowMs = ctx.clock.nowMs();
  const name = checkName(s.name, "schedule.name");
  if (!s.task) throw invalidField("schedule.task", "missing");
  for (const [key, field, why] of REFUSED_TASK_FIELDS) {
    const v = s.task[key];
    if (v !== "" && v !== 0n) throw invalidField(`schedule.task.${field}`, `not allowed in a schedule: ${why}`);
  }
  if (s.task.payload.byteLength > SCHEDULE_PAYLOAD_MAX_BYTES) {
    throw invalidField("schedule.task.payload", `is ${s.task.payload.byteLength} bytes; a schedule's limit is ${SCHEDULE_PAYLOAD_MAX_BYTES} (${formatBytes(SCHEDULE_PAYLOAD_MAX_BYTES)})`);
  }
  // Validated against time 0, so the relative times come back as offsets.
  const { id: _id, idChosen: _chosen, processAtMs, expiresAtMs, deadlineAtMs: _d, uniqueKey: _u, uniqueTtlMs: _t, ...task } =
    validateSpec(s.task, "schedule.task", ctx.taskDefaults, 0, () => "");
  const evaluated = task.group === "" ? ctx.rules.evaluate(task.type, task.payload, task.metadata, "schedule.task") : undefined;
  const template: TaskTemplate = {
    ...task, processInMs: processAtMs, expiresInMs: expiresAtMs,
    ...(evaluated ? { rules: evaluated.rules, ruleError: evaluated.error } : {}),
  };
  const missed = missedFromWire(s.missedTicks);
  return { queue: task.queue, spec: { name, task: template, cadence: cadenceOf(s, nowMs), missed, skipIfRunning: s.skipIfRunning } };
}

function cadenceOf(s: Schedule, nowMs: number): Cadence {
  switch (s.cadence.case) {
    case "cron": {
      const timeZone = checkTimeZone(s.timeZone, "schedule.time_zone");
      return { kind: "cron", expression: checkCron(s.cadence.value, timeZone, "schedule.cron", nowMs), timeZone };
    }
    case "intervalMs": {
      if (s.timeZone !== "") throw invalidField("schedule.time_zone", "applies to cron schedules only");
      const everyMs = checkDurationMs(s.cadence.value, "schedule.interval_ms");
      if (everyMs < SCHEDULE_INTERVAL_MIN_MS) throw invalidField("schedule.interval_ms", `must be at least ${SCHEDULE_INTERVAL_MIN_MS}, got ${everyMs}`);
      return { kind: "interval", everyMs, anchorMs: 0 }; // the grain anchors it when it takes it
    }
    default:
      throw invalidField("schedule.cron", "set cron or interval_ms");
  }
}

function missedFromWire(m: WireMissed): MissedTicks {
  if (m === WireMissed.UNSPECIFIED) return "latest";
  const found = (Object.keys(MISSED_TO_WIRE) as MissedTicks[]).find((k) => MISSED_TO_WIRE[k] === m);
  if (!found) throw invalidField("schedule.missed_ticks", `unknown value ${m}`);
  return found;
}

/** A stored schedule on the wire, its next tick computed at `nowMs`. */
export function scheduleToWire(s: StoredSchedule, nowMs: number): Schedule {
  const t = s.task;
  const big = (n: number) => BigInt(n);
  const next = s.paused ? undefined : upcomingTick(s, nowMs, cronCalendar);
  return create(ScheduleSchema, {
    name: s.name,
    task: create(TaskSpecSchema, {
      type: t.type, payload: t.payload, contentType: t.contentType, metadata: t.metadata, queue: s.queue, priority: t.priority,
      maxRetry: t.maxRetry, timeoutMs: big(t.timeoutMs), processInMs: big(t.processInMs), retentionMs: big(t.retentionMs),
      expiresInMs: big(t.expiresInMs), concurrencyKey: t.concurrencyKey, group: t.group,
      backoffBaseMs: big(t.backoffBaseMs), backoffMaxMs: big(t.backoffMaxMs),
    }),
    cadence: s.cadence.kind === "cron" ? { case: "cron", value: s.cadence.expression } : { case: "intervalMs", value: big(s.cadence.everyMs) },
    timeZone: s.cadence.kind === "cron" ? s.cadence.timeZone : "",
    missedTicks: MISSED_TO_WIRE[s.missed],
    skipIfRunning: s.skipIfRunning,
    paused: s.paused,
    nextTickAtMs: big(next ?? 0),
    lastTickAtMs: big(s.lastTickAtMs),
    lastTaskId: s.lastTaskId,
    lastTaskState: s.lastTaskState ? stateToWire(s.lastTaskState) : WireState.UNSPECIFIED,
    createdAtMs: big(s.createdAtMs),
    updatedAtMs: big(s.updatedAtMs),
  });
}
