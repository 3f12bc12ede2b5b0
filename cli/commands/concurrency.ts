/** `conveyor concurrency set|ls|rm`: per-queue, per-key concurrency limits. */
import type { Command } from "commander";
import {
  AdminService,
  ListConcurrencyLimitsResponseSchema,
  SetQueueConcurrencyLimitResponseSchema,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import type { CliContext } from "../context.js";
import { intArg } from "../options.js";
import { printJson, printMessage, printLine, printTable, warnSimilarQueue } from "../output.js";

export function registerConcurrencyCommands(program: Command, ctx: CliContext): void {
  const group = program.command("concurrency").description("per-key concurrency limits of queues");

  group
    .command("set")
    .description("run at most N tasks at once per concurrency key on QUEUE (live, durable)")
    .argument("<queue>", "queue name")
    .requiredOption("--max <n>", "most tasks of any one key running at once (at least 1)", intArg(1, 1_000_000, "must be a whole number of at least 1"))
    .action(async (queue: string, opts: { max: number }, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).setQueueConcurrencyLimit({ queue, max: opts.max }, s.call);
      warnSimilarQueue(s.io, queue, res.similarQueue);
      if (s.json) return printMessage(s.io, SetQueueConcurrencyLimitResponseSchema, res);
      printLine(s.io, `queue ${queue}: at most ${res.limit?.max ?? opts.max} running per concurrency key`);
    });

  group
    .command("ls")
    .description("list per-queue limits with tasks running and held now")
    .action(async (_opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).listConcurrencyLimits({}, s.call);
      if (s.json) return printMessage(s.io, ListConcurrencyLimitsResponseSchema, res);
      if (res.limits.length === 0) return printLine(s.io, "no concurrency limits (every key is unbounded)");
      printTable(s.io, ["QUEUE", "MAX PER KEY", "IN FLIGHT", "HELD"],
        res.limits.map((l) => [l.queue, String(l.max), String(l.inFlight), String(l.held)]),
        ["left", "right", "right", "right"]);
    });

  group
    .command("rm")
    .description("clear QUEUE's limit: its keys go unbounded")
    .argument("<queue>", "queue name")
    .action(async (queue: string, _opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      await s.client(AdminService).deleteQueueConcurrencyLimit({ queue }, s.call);
      if (s.json) return printJson(s.io, { queue, removed: true });
      printLine(s.io, `queue ${queue}: concurrency limit removed`);
    });
}
