/** `conveyor enqueue`: TaskService.Enqueue from flags. */
import { Option, type Command } from "commander";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { EnqueueResponseSchema, TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import type { TaskSpecSchema } from "../../src/gen/conveyor/v1/task_pb.js";
import type { CliContext } from "../context.js";
import { durationArg, instantArg, intArg, jsonArg, keyValueArg, stateName } from "../options.js";
import { printJson, printMessage, printLine } from "../output.js";

const INT32_MAX = 2 ** 31 - 1;

export interface EnqueueOptions {
  type: string;
  queue?: string;
  payload?: string;
  priority?: number;
  maxRetry?: number;
  processIn?: number;
  processAt?: number;
  timeout?: number;
  deadline?: number;
  uniqueKey?: string;
  uniqueTtl?: number;
  taskId?: string;
  retention?: number;
  expiresIn?: number;
  concurrencyKey?: string;
  group?: string;
  metadata?: Record<string, string>;
}

export function registerEnqueueCommand(program: Command, ctx: CliContext): void {
  program
    .command("enqueue")
    .description("enqueue one task")
    .requiredOption("--type <type>", "handler selector, e.g. email:send")
    .option("--queue <queue>", "queue name (default \"default\")")
    .option("--payload <json>", "payload, a JSON document (sent as application/json)", jsonArg)
    .option("--priority <n>", "1..9, 9 highest (default 4)", intArg(1, 9, "must be 1..9 (9 highest)"))
    .option("--max-retry <n>", "retries after the first attempt (default: the server's)", intArg(0, INT32_MAX, "must be 0 or more"))
    .addOption(new Option("--process-in <duration>", "run after this delay, e.g. 30s").argParser(durationArg).conflicts("processAt"))
    .option("--process-at <time>", "run no earlier than this ISO 8601 time", instantArg)
    .option("--timeout <duration>", "per-attempt timeout, e.g. 1m (the RPC deadline is `conveyor --timeout <d> enqueue ...`)", durationArg)
    .option("--deadline <time>", "absolute deadline for the whole task, ISO 8601", instantArg)
    .option("--unique-key <key>", "reject a duplicate among the queue's unfinished tasks")
    .option("--unique-ttl <duration>", "how long the unique key is held (default: until the task finishes)", durationArg)
    .option("--task-id <id>", "choose the task id; an existing id returns the existing task")
    .option("--retention <duration>", "how long a completed task is kept (default: the server's)", durationArg)
    .option("--expires-in <duration>", "archive the task if not dispatched within this delay", durationArg)
    .option("--concurrency-key <key>", "share the queue's per-key concurrency budget")
    .option("--group <group>", "aggregation group")
    .option("--metadata <key=value>", "metadata entry (repeatable)", keyValueArg)
    .action(async (opts: EnqueueOptions, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(TaskService).enqueue({ task: toSpec(opts) }, s.call);
      if (s.json) return printMessage(s.io, EnqueueResponseSchema, res);
      const r = res.result;
      if (!r) return printLine(s.io, "enqueued");
      printLine(s.io, `enqueued ${r.id} to ${r.queue} (${stateName(r.state)}${r.existed ? ", already existed" : ""})`);
    });
}

const ms = (value: number | undefined): bigint => BigInt(value ?? 0);

export function toSpec(o: EnqueueOptions): MessageInitShape<typeof TaskSpecSchema> {
  return {
    type: o.type,
    queue: o.queue ?? "",
    ...(o.payload !== undefined ? { payload: new TextEncoder().encode(o.payload), contentType: "application/json" } : {}),
    ...(o.priority !== undefined ? { priority: o.priority } : {}),
    ...(o.maxRetry !== undefined ? { maxRetry: o.maxRetry } : {}),
    ...(o.retention !== undefined ? { retentionMs: BigInt(o.retention) } : {}),
    processInMs: ms(o.processIn),
    processAtMs: ms(o.processAt),
    timeoutMs: ms(o.timeout),
    deadlineAtMs: ms(o.deadline),
    uniqueKey: o.uniqueKey ?? "",
    uniqueTtlMs: ms(o.uniqueTtl),
    taskId: o.taskId ?? "",
    expiresInMs: ms(o.expiresIn),
    concurrencyKey: o.concurrencyKey ?? "",
    group: o.group ?? "",
    metadata: o.metadata ?? {},
  };
}
