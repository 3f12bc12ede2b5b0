/**
 * A schedule's durable shape and the arithmetic of its ticks: when the next one falls
 * and which one is the latest at or before an instant.
 *
 * Why a port for cron: the grain must stay pure and import nothing but `base`, so the
 * cron library (cron-parser, with its IANA zones and daylight-saving rules) lives in the
 * server behind `CronCalendar`; fixed intervals are plain arithmetic and stay here.
 *
 * A tick is an instant. The task a tick enqueues has an id derived from (schedule,
 * tick), `tickTaskId`, so enqueueing a tick twice is the idempotent-id admission path's
 * "already exists", never a second task.
 */
import type { NewTask } from "./task.js";

/** What to do with ticks that came due while nobody could enqueue them (node down, clock jump). */
export type MissedTicks = "latest" | "skip";

/** Either a cron expression in a zone, or a fixed interval counted from an anchor. */
export type Cadence =
  | { kind: "cron"; expression: string; timeZone: string }
  /** Ticks at anchorMs + k·everyMs, k ≥ 1 (the grain sets the anchor: when the interval was set). */
  | { kind: "interval"; everyMs: number; anchorMs: number };

/** Cron arithmetic (implemented with a cron library in the server). Both answer undefined when no such tick exists. */
export interface CronCalendar {
  /** The first tick strictly after `afterMs`. */
  next(expression: string, timeZone: string, afterMs: number): number | undefined;
  /** The latest tick at or before `atMs`. */
  prev(expression: string, timeZone: string, atMs: number): number | undefined;
}

/**
 * The task a schedule enqueues at each tick: a NewTask without its identity and absolute
 * instants. `processInMs`/`expiresInMs` (0 = unset) count from the tick's enqueue.
 */
export type TaskTemplate = Omit<NewTask, "id" | "idChosen" | "processAtMs" | "expiresAtMs" | "deadlineAtMs" | "uniqueKey" | "uniqueTtlMs">
  & { processInMs: number; expiresInMs: number };

/** What an operator sets. */
export interface ScheduleSpec {
  name: string;
  task: TaskTemplate;
  cadence: Cadence;
  missed: MissedTicks;
  /** Overlap guard: a tick is skipped while the previous task of the schedule is unfinished. */
  skipIfRunning: boolean;
}

/** A schedule as the grain keeps and stores it. */
export interface ScheduleState extends ScheduleSpec {
  paused: boolean;
  createdAtMs: number;
  updatedAtMs: number;
  /** The cursor: every tick at or before it has been handled (enqueued or skipped). */
  lastTickAtMs: number;
  /** The last task the schedule enqueued ("" = none yet). */
  lastTaskId: string;
}

/** The id of the task a tick enqueues. */
export function tickTaskId(name: string, tickMs: number): string {
  return `schedule:${name}:${tickMs}`;
}

/** The id of the task an operator's run-now enqueues at `nowMs`. */
export function runNowTaskId(name: string, nowMs: number): string {
  return `schedule:${name}:now:${nowMs}`;
}

/** The first tick strictly after `afterMs`. */
export function nextTickAfter(cadence: Cadence, afterMs: number, cron: CronCalendar): number | undefined {
  if (cadence.kind === "cron") return cron.next(cadence.expression, cadence.timeZone, afterMs);
  const { anchorMs, everyMs } = cadence;
  if (afterMs < anchorMs) return anchorMs + everyMs;
  return anchorMs + (Math.floor((afterMs - anchorMs) / everyMs) + 1) * everyMs;
}

/** The latest tick at or before `atMs`. */
export function latestTickAtOrBefore(cadence: Cadence, atMs: number, cron: CronCalendar): number | undefined {
  if (cadence.kind === "cron") return cron.prev(cadence.expression, cadence.timeZone, atMs);
  const { anchorMs, everyMs } = cadence;
  if (atMs < anchorMs + everyMs) return undefined;
  return anchorMs + Math.floor((atMs - anchorMs) / everyMs) * everyMs;
}

/** Steps of `next` taken from the latest-tick hint (a daylight-saving jump is one or two). */
const LATEST_WALK_MAX = 16;

/**
 * The latest tick after the cursor and at or before `nowMs`; undefined when none is due.
 *
 * Ticks are the chain `next` produces from the cursor. `prev` is only a hint to jump over
 * a long outage: a cron library's `prev` and `next` may disagree around a daylight-saving
 * change (cron-parser's `prev` names the second 02:30 of a fall-back night and skips the
 * spring-forward day, while `next` gives the first 02:30 and 03:30), so the answer is
 * always a tick of the `next` chain: due only when `next(cursor)` is, and then walked
 * forward with `next` from the hint.
 */
export function latestDueTick(cadence: Cadence, cursorMs: number, nowMs: number, cron: CronCalendar): number | undefined {
  const first = nextTickAfter(cadence, cursorMs, cron);
  if (first === undefined || first > nowMs) return undefined;
  let latest = first;
  const hint = latestTickAtOrBefore(cadence, nowMs, cron);
  let t = nextTickAfter(cadence, hint !== undefined && hint > latest ? hint - 1 : latest, cron);
  for (let steps = 0; t !== undefined && t <= nowMs && steps < LATEST_WALK_MAX; steps++) {
    latest = Math.max(latest, t);
    t = nextTickAfter(cadence, t, cron);
  }
  return latest;
}

/**
 * The tick a schedule handles next, seen at `nowMs`: a due tick not yet handled, else the
 * first tick after now. What the grain arms its timer for and the dashboard shows.
 */
export function upcomingTick(s: Pick<ScheduleState, "cadence" | "lastTickAtMs">, nowMs: number, cron: CronCalendar): number | undefined {
  return latestDueTick(s.cadence, s.lastTickAtMs, nowMs, cron) ?? nextTickAfter(s.cadence, Math.max(s.lastTickAtMs, nowMs), cron);
}
