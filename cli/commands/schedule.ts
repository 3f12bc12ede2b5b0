/** `conveyor schedule set|ls|rm|pause|resume|run-now`: periodic tasks (AdminService schedules). */
import { Option, type Command } from "commander";
import {
  AdminService, ListSchedulesResponseSchema, MissedTicks, PauseScheduleResponseSchema, ResumeScheduleResponseSchema,
  RunScheduleNowResponseSchema, SetScheduleResponseSchema, type Schedule,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
import type { CliContext, Session } from "../context.js";
import { durationArg, intArg, jsonArg, keyValueArg, stateName } from "../options.js";
import { formatInstant, printJson, printLine, printMessage, printTable } from "../output.js";

const INT32_MAX = 2 ** 31 - 1;

interface SetOptions {
  queue?: string;
  type: string;
  cron?: string;
  every?: number;
  tz?: string;
  missed: "latest" | "skip";
  skipIfRunning?: boolean;
  payload?: string;
  priority?: number;
  maxRetry?: number;
  timeout?: number;
  retention?: number;
  processIn?: number;
  expiresIn?: number;
  concurrencyKey?: string;
  group?: string;
  metadata?: Record<string, string>;
}

const ms = (value: number | undefined): bigint => BigInt(value ?? 0);

function cadenceText(s: Schedule): string {
  if (s.cadence.case === "cron") return `cron "${s.cadence.value}"${s.timeZone ? ` ${s.timeZone}` : " UTC"}`;
  if (s.cadence.case === "intervalMs") return `every ${s.cadence.value}ms`;
  return "-";
}

/** `--queue` (default "default") and the schedule's name, as the target of a command. */
function target(name: string, opts: { queue?: string }) {
  return { queue: opts.queue ?? "", name };
}

export function registerScheduleCommands(program: Command, ctx: CliContext): void {
  const group = program.command("schedule").description("periodic tasks: enqueue a task on a cron expression or a fixed interval");

  group
    .command("set")
    .description("create or replace the schedule NAME of a queue (exactly one task per tick, durable)")
    .argument("<name>", "schedule name, unique within its queue")
    .requiredOption("--type <type>", "task type each tick enqueues")
    .option("--queue <queue>", "queue name (default \"default\")")
    .addOption(new Option("--cron <expr>", "cron expression: 5 fields, or 6 with seconds first").conflicts("every"))
    .option("--every <duration>", "fixed interval (at least 1s), e.g. 30s, 5m", durationArg)
    .option("--tz <zone>", "IANA time zone of --cron, e.g. Europe/Berlin (default UTC)")
    .addOption(new Option("--missed <policy>", "ticks missed while the node was down: enqueue the latest one, or skip them").choices(["latest", "skip"]).default("latest"))
    .option("--skip-if-running", "skip a tick while the schedule's previous task is unfinished")
    .option("--payload <json>", "payload, a JSON document (sent as application/json)", jsonArg)
    .option("--priority <n>", "1..9, 9 highest (default 4)", intArg(1, 9, "must be 1..9 (9 highest)"))
    .option("--max-retry <n>", "retries after the first attempt (default: the server's)", intArg(0, INT32_MAX, "must be 0 or more"))
    .option("--timeout <duration>", "per-attempt timeout, e.g. 1m", durationArg)
    .option("--retention <duration>", "how long a completed task is kept (default: the server's)", durationArg)
    .option("--process-in <duration>", "run each task this long after its tick", durationArg)
    .option("--expires-in <duration>", "archive a task not dispatched within this delay of its tick", durationArg)
    .option("--concurrency-key <key>", "share the queue's per-key concurrency budget")
    .option("--group <group>", "aggregation group")
    .option("--metadata <key=value>", "metadata entry (repeatable)", keyValueArg)
    .action(async (name: string, o: SetOptions, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).setSchedule({
        schedule: {
          name,
          task: {
            type: o.type, queue: o.queue ?? "",
            ...(o.payload !== undefined ? { payload: new TextEncoder().encode(o.payload), contentType: "application/json" } : {}),
            ...(o.priority !== undefined ? { priority: o.priority } : {}),
            ...(o.maxRetry !== undefined ? { maxRetry: o.maxRetry } : {}),
            ...(o.retention !== undefined ? { retentionMs: BigInt(o.retention) } : {}),
            timeoutMs: ms(o.timeout), processInMs: ms(o.processIn), expiresInMs: ms(o.expiresIn),
            concurrencyKey: o.concurrencyKey ?? "", group: o.group ?? "", metadata: o.metadata ?? {},
          },
          // Neither flag: the server names the missing cadence (schedule.cron).
          cadence: o.cron !== undefined ? { case: "cron", value: o.cron } : o.every !== undefined ? { case: "intervalMs", value: BigInt(o.every) } : { case: undefined },
          timeZone: o.tz ?? "",
          missedTicks: o.missed === "skip" ? MissedTicks.SKIP : MissedTicks.LATEST,
          skipIfRunning: o.skipIfRunning ?? false,
        },
      }, s.call);
      if (s.json) return printMessage(s.io, SetScheduleResponseSchema, res);
      const sch = res.schedule;
      printLine(s.io, `schedule ${name} of queue ${sch?.task?.queue ?? o.queue ?? "default"}: ${sch ? cadenceText(sch) : ""}, next tick ${sch ? formatInstant(sch.nextTickAtMs) : "-"}`);
    });

  group
    .command("ls")
    .description("list schedules with their next tick and their last task")
    .option("--queue <queue>", "only this queue's schedules")
    .action(async (opts: { queue?: string }, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).listSchedules({ queue: opts.queue ?? "" }, s.call);
      if (s.json) return printMessage(s.io, ListSchedulesResponseSchema, res);
      if (res.schedules.length === 0) return printLine(s.io, "no schedules");
      printTable(s.io, ["QUEUE", "NAME", "TYPE", "CADENCE", "STATUS", "NEXT TICK", "LAST TASK", "LAST STATE"], res.schedules.map((x) => [
        x.task?.queue ?? "", x.name, x.task?.type ?? "", cadenceText(x), x.paused ? "paused" : "active",
        x.nextTickAtMs > 0n ? formatInstant(x.nextTickAtMs) : "-", x.lastTaskId || "-", !x.lastTaskId ? "-" : x.lastTaskState === TaskState.UNSPECIFIED ? "(purged)" : stateName(x.lastTaskState),
      ]));
    });

  const simple = (verb: string, description: string, run: (s: Session, t: { queue: string; name: string }) => Promise<string>) =>
    group
      .command(verb)
      .description(description)
      .argument("<name>", "schedule name")
      .option("--queue <queue>", "queue name (default \"default\")")
      .action(async (name: string, opts: { queue?: string }, cmd: Command) => {
        const s = ctx.session(cmd);
        const line = await run(s, target(name, opts));
        if (line) printLine(s.io, line);
      });

  simple("rm", "delete a schedule (its tasks stay)", async (s, t) => {
    await s.client(AdminService).deleteSchedule(t, s.call);
    if (s.json) return printJson(s.io, { ...t, removed: true }), "";
    return `schedule ${t.name} removed`;
  });
  simple("pause", "stop enqueueing ticks (ticks while paused are skipped, not missed)", async (s, t) => {
    const res = await s.client(AdminService).pauseSchedule(t, s.call);
    if (s.json) return printMessage(s.io, PauseScheduleResponseSchema, res), "";
    return `schedule ${t.name} paused`;
  });
  simple("resume", "enqueue ticks again, from the next one", async (s, t) => {
    const res = await s.client(AdminService).resumeSchedule(t, s.call);
    if (s.json) return printMessage(s.io, ResumeScheduleResponseSchema, res), "";
    return `schedule ${t.name} resumed, next tick ${res.schedule ? formatInstant(res.schedule.nextTickAtMs) : "-"}`;
  });
  simple("run-now", "enqueue the schedule's task now, outside its cadence", async (s, t) => {
    const res = await s.client(AdminService).runScheduleNow(t, s.call);
    if (s.json) return printMessage(s.io, RunScheduleNowResponseSchema, res), "";
    return `enqueued ${res.taskId}`;
  });
}
