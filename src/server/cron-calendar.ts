/**
 * The grain's `CronCalendar` over cron-parser (the only file that imports it), and the
 * validation of a schedule's cron expression and time zone.
 *
 * Why cron-parser: kept up (5.x, 2026), typed, supports an optional seconds field,
 * `next` and `prev`, and IANA zones through Luxon, whose daylight-saving rules are what a
 * schedule follows: a local time that does not exist (the spring-forward hour) fires at
 * the same minute of the next hour, and a local time that occurs twice (fall back) fires
 * once, at its first occurrence. docs/concepts/schedules.md says so, and
 * test/unit/schedules.test.ts holds the library to it.
 *
 * Each call parses the expression anew with its start instant: an iterator keeps state,
 * and a grain computes one or two ticks per schedule per tick, so a cache would buy little.
 */
import { CronExpressionParser } from "cron-parser";
import { invalidField } from "../base/errors.js";
import { CRON_EXPRESSION_MAX_CHARS, quote } from "../base/limits.js";
import type { CronCalendar } from "../grains/queue/schedule.js";
import { checkLength } from "./validate.js";

/** UTC when a schedule names no zone. */
export const DEFAULT_TIME_ZONE = "UTC";

const parse = (expression: string, timeZone: string, currentMs: number) =>
  CronExpressionParser.parse(expression, { tz: timeZone || DEFAULT_TIME_ZONE, currentDate: new Date(currentMs) });

/** The grain's CronCalendar over cron-parser. */
export const cronCalendar: CronCalendar = {
  next(expression, timeZone, afterMs) {
    try {
      return parse(expression, timeZone, afterMs).next().getTime();
    } catch {
      return undefined; // no tick left in the library's range (e.g. a year-bounded expression)
    }
  },
  prev(expression, timeZone, atMs) {
    try {
      // `prev` is strictly before its start: start one millisecond later to include `atMs`.
      return parse(expression, timeZone, atMs + 1).prev().getTime();
    } catch {
      return undefined;
    }
  },
};

/** A time zone the runtime knows (an IANA name such as "Europe/Berlin"), or "" for UTC. */
export function checkTimeZone(timeZone: string, field: string): string {
  checkLength(timeZone, field, 64);
  if (timeZone === "") return timeZone;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone });
  } catch {
    throw invalidField(field, `unknown time zone ${quote(timeZone)}: use an IANA name such as "Europe/Berlin"`);
  }
  return timeZone;
}

/** A cron expression the library accepts (5 fields, or 6 with seconds first) that has a next tick. */
export function checkCron(expression: string, timeZone: string, field: string, nowMs: number): string {
  checkLength(expression, field, CRON_EXPRESSION_MAX_CHARS);
  if (expression.trim() === "") throw invalidField(field, "must not be empty");
  try {
    parse(expression, timeZone, nowMs).next();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw invalidField(field, `invalid cron expression ${quote(expression)}: ${quote(reason, 200)}`);
  }
  return expression;
}
