/**
 * `conveyor task ls|get|cancel|delete|run|archive|retry` and the bulk actions
 * `retry-all|archive-all|delete-all|cancel-all QUEUE --state S`: AdminService task views and actions.
 */
import { Option, type Command } from "commander";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import {
  AdminService,
  AdminServiceCancelTaskResponseSchema,
  AdminServiceGetTaskResponseSchema,
  ArchiveTaskResponseSchema,
  BulkAction,
  BulkTaskActionResponseSchema,
  DeleteTaskResponseSchema,
  ListTasksResponseSchema,
  RetryTaskResponseSchema,
  RunTaskResponseSchema,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskState, type Attempt, type Task } from "../../src/gen/conveyor/v1/task_pb.js";
import type { CliContext, Session } from "../context.js";
import { intArg, STATE_BY_NAME, STATE_NAMES, stateName } from "../options.js";
import {
  formatBody,
  formatDuration,
  formatInstant,
  orDash,
  printFields,
  printMessage,
  printLine,
  printTable,
  relativeTime,
  truncate,
} from "../output.js";

interface ListOptions {
  state?: string;
  limit: number;
  pageToken?: string;
}

export function registerTaskCommands(program: Command, ctx: CliContext): void {
  const task = program.command("task").description("inspect tasks and act on them");

  task
    .command("ls")
    .description("list a queue's tasks, oldest first")
    .argument("<queue>", "queue name")
    .addOption(new Option("--state <state>", "only tasks in this state").choices(STATE_NAMES))
    .option("--limit <n>", "tasks per page, 1..1000", intArg(1, 1000), 50)
    .option("--page-token <token>", "continue from a previous page")
    .action(async (queue: string, opts: ListOptions, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).listTasks({
        queue,
        state: opts.state === undefined ? TaskState.UNSPECIFIED : STATE_BY_NAME[opts.state]!,
        pageSize: opts.limit,
        pageToken: opts.pageToken ?? "",
      }, s.call);
      if (s.json) return printMessage(s.io, ListTasksResponseSchema, res);
      if (res.tasks.length === 0) {
        printLine(s.io, `no ${opts.state ? `${opts.state} ` : ""}tasks in queue ${queue}`);
      } else {
        const now = Date.now();
        printTable(
          s.io,
          ["ID", "TYPE", "STATE", "PRIORITY", "RETRIED", "CREATED", "LAST ERROR"],
          res.tasks.map((t) => [
            t.id,
            t.type,
            stateName(t.state),
            String(t.priority),
            `${t.retried}/${t.maxRetry}`,
            relativeTime(Number(t.createdAtMs), now),
            t.lastError,
          ]),
          ["left", "left", "left", "right", "right", "left", "left"],
        );
      }
      if (res.nextPageToken !== "") printLine(s.io, `more: --page-token ${res.nextPageToken}`);
    });

  task
    .command("get")
    .description("show every field of a task")
    .argument("<id>", "task id")
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).getTask({ id }, s.call);
      if (s.json) return printMessage(s.io, AdminServiceGetTaskResponseSchema, res);
      if (res.task) printFields(s.io, taskFields(res.task));
      printAttempts(s, res.attempts);
    });

  const action = <Desc extends DescMessage>(
    name: string,
    description: string,
    schema: Desc,
    call: (s: Session, id: string) => Promise<MessageShape<Desc>>,
    describe: (id: string, task: Task | undefined) => string,
  ) =>
    task
      .command(name)
      .description(description)
      .argument("<id>", "task id")
      .action(async (id: string, _opts: unknown, cmd: Command) => {
        const s = ctx.session(cmd);
        const res = await call(s, id);
        if (s.json) return printMessage(s.io, schema, res);
        printLine(s.io, describe(id, (res as { task?: Task }).task));
      });

  const nowIn = (id: string, t: Task | undefined) => `task ${id} is now ${t ? stateName(t.state) : "pending"}`;
  action("cancel", "cancel a task that has not finished", AdminServiceCancelTaskResponseSchema,
    (s, id) => s.client(AdminService).cancelTask({ id }, s.call), (id) => `task ${id} cancelled`);
  action("delete", "delete a task that is not running", DeleteTaskResponseSchema,
    (s, id) => s.client(AdminService).deleteTask({ id }, s.call), (id) => `task ${id} deleted`);
  action("run", "make a scheduled or retry task pending now", RunTaskResponseSchema,
    (s, id) => s.client(AdminService).runTask({ id }, s.call), nowIn);
  action("archive", "move a scheduled, pending or retry task to the dead letter", ArchiveTaskResponseSchema,
    (s, id) => s.client(AdminService).archiveTask({ id }, s.call), (id) => `task ${id} archived`);
  action("retry", "give an archived or cancelled task a fresh set of retries", RetryTaskResponseSchema,
    (s, id) => s.client(AdminService).retryTask({ id }, s.call), nowIn);

  registerBulkCommands(task, ctx);
}

/** The bulk actions: the same action on every task of a queue in one state (BulkTaskAction). */
const BULK_COMMANDS = [
  { name: "retry-all", action: BulkAction.RETRY, done: "retried", about: "give every archived or cancelled task of a queue in a state a fresh set of retries" },
  { name: "archive-all", action: BulkAction.ARCHIVE, done: "archived", about: "archive every waiting task of a queue in a state" },
  { name: "delete-all", action: BulkAction.DELETE, done: "deleted", about: "delete every task of a queue in a state (not active)" },
  { name: "cancel-all", action: BulkAction.CANCEL, done: "cancelled", about: "cancel every unfinished task of a queue in a state" },
] as const;

function registerBulkCommands(task: Command, ctx: CliContext): void {
  for (const bulk of BULK_COMMANDS) {
    task
      .command(bulk.name)
      .description(`${bulk.about}; prints how many changed`)
      .argument("<queue>", "queue name")
      .addOption(new Option("--state <state>", "the state of the tasks to act on").choices(STATE_NAMES).makeOptionMandatory())
      .action(async (queue: string, opts: { state: string }, cmd: Command) => {
        const s = ctx.session(cmd);
        const res = await s.client(AdminService).bulkTaskAction({ queue, state: STATE_BY_NAME[opts.state]!, action: bulk.action }, s.call);
        if (s.json) return printMessage(s.io, BulkTaskActionResponseSchema, res);
        const n = res.affected;
        printLine(s.io, `${n} ${opts.state} task${n === 1n ? "" : "s"} ${bulk.done} in queue ${queue}`);
      });
  }
}

/** `task get`'s attempt history: one row per attempt, oldest first. */
function printAttempts(s: Session, attempts: readonly Attempt[]): void {
  printLine(s.io, "");
  if (attempts.length === 0) return printLine(s.io, "attempts: none yet");
  const now = Date.now();
  printTable(
    s.io,
    ["ATTEMPT", "STARTED", "TOOK", "WORKER", "OUTCOME", "ERROR"],
    attempts.map((a) => [
      String(a.number),
      formatInstant(a.startedAtMs, now),
      a.startedAtMs === 0n ? "-" : `${a.endedAtMs - a.startedAtMs}ms`,
      orDash(a.workerId),
      a.outcome,
      orDash(truncate(a.error.replace(/\s+/g, " "), 60)),
    ]),
    ["right", "left", "right", "left", "left", "left"],
  );
  printLastStack(s, attempts);
}

/** The stack of the latest attempt that carries one, whole (the table has no room for it; --json has every attempt's). */
function printLastStack(s: Session, attempts: readonly Attempt[]): void {
  const last = [...attempts].reverse().find((a) => a.stack !== "");
  if (!last) return;
  printLine(s.io, "");
  printLine(s.io, `stack of attempt ${last.number}:`);
  for (const line of last.stack.split("\n")) printLine(s.io, `  ${line}`);
}

/** Every field of a task, for `task get`. */
export function taskFields(t: Task, nowMs: number = Date.now()): Array<[string, string]> {
  const at = (ms: bigint) => formatInstant(ms, nowMs);
  const metadata = Object.entries(t.metadata).map(([k, v]) => `${k}=${v}`);
  return [
    ["id", t.id],
    ["queue", t.queue],
    ["type", t.type],
    ["state", stateName(t.state)],
    ["priority", String(t.priority)],
    ["retried", String(t.retried)],
    ["max retry", String(t.maxRetry)],
    ["created", at(t.createdAtMs)],
    ["ready at", at(t.readyAtMs)],
    ["timeout", formatDuration(t.timeoutMs)],
    ["deadline", at(t.deadlineAtMs)],
    ["expires at", at(t.expiresAtMs)],
    ["unique key", orDash(t.uniqueKey)],
    ["concurrency key", orDash(t.concurrencyKey)],
    ["group", orDash(t.group)],
    ["last error", orDash(t.lastError)],
    ["last failed", at(t.lastFailedAtMs)],
    ["finished", at(t.finishedAtMs)],
    ["cancel reason", orDash(t.cancelReason)],
    ["lease", orDash(t.leaseId)],
    ["lease expires", at(t.leaseExpiresAtMs)],
    ["held by", orDash(t.leaseWorkerId)],
    ["held since", at(t.leasedAtMs)],
    ["retention", formatDuration(t.retentionMs)],
    ["content type", orDash(t.contentType)],
    ["metadata", metadata.length === 0 ? "-" : metadata.join("\n")],
    ["payload", formatBody(t.payload, t.contentType)],
    ["result", formatBody(t.result, "")],
  ];
}
