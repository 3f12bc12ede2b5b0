/** `conveyor ratelimit set|ls|rm`: per-queue token-bucket rate limits. */
import { InvalidArgumentError, type Command } from "commander";
import {
  AdminService,
  ListRateLimitsResponseSchema,
  SetQueueRateLimitResponseSchema,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import type { CliContext } from "../context.js";
import { intArg } from "../options.js";
import { printJson, printMessage, printLine, printTable, warnSimilarQueue } from "../output.js";

function rateArg(value: string): number {
  const n = Number(value.trim());
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a number greater than 0 (tasks per second)");
  return n;
}

export function registerRateLimitCommands(program: Command, ctx: CliContext): void {
  const group = program.command("ratelimit").description("per-queue rate limits (token bucket)");

  group
    .command("set")
    .description("dispatch at most RATE tasks per second from QUEUE, with bursts up to BURST (live, durable)")
    .argument("<queue>", "queue name")
    .requiredOption("--rate <r>", "sustained tasks per second, e.g. 50 or 0.5", rateArg)
    .option("--burst <b>", "tasks allowed at once after an idle period (default max(1, ceil(rate)))", intArg(1, 1_000_000, "must be a whole number of at least 1"))
    .action(async (queue: string, opts: { rate: number; burst?: number }, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).setQueueRateLimit({ queue, ratePerSec: opts.rate, burst: opts.burst ?? 0 }, s.call);
      warnSimilarQueue(s.io, queue, res.similarQueue);
      if (s.json) return printMessage(s.io, SetQueueRateLimitResponseSchema, res);
      printLine(s.io, `queue ${queue}: at most ${res.limit?.ratePerSec} tasks/s, burst ${res.limit?.burst}`);
    });

  group
    .command("ls")
    .description("list per-queue overrides and the server default")
    .action(async (_opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).listRateLimits({}, s.call);
      if (s.json) return printMessage(s.io, ListRateLimitsResponseSchema, res);
      const rows = res.limits.map((l) => [l.queue, String(l.ratePerSec), String(l.burst)]);
      if (res.defaultLimit) rows.push(["(default)", String(res.defaultLimit.ratePerSec), String(res.defaultLimit.burst)]);
      if (rows.length === 0) return printLine(s.io, "no rate limits (queues are unlimited by default)");
      printTable(s.io, ["QUEUE", "RATE/S", "BURST"], rows, ["left", "right", "right"]);
    });

  group
    .command("rm")
    .description("clear QUEUE's override: it falls back to the server default")
    .argument("<queue>", "queue name")
    .action(async (queue: string, _opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      await s.client(AdminService).deleteQueueRateLimit({ queue }, s.call);
      if (s.json) return printJson(s.io, { queue, removed: true });
      printLine(s.io, `queue ${queue}: rate limit override removed`);
    });
}
