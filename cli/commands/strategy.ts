/** `conveyor strategy set|ls|rm`: the concurrency rules of task types. */
import { InvalidArgumentError, type Command } from "commander";
import {
  AdminService,
  ListStrategiesResponseSchema,
  SetStrategiesResponseSchema,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { LimitStrategy, type ConcurrencyRule } from "../../src/gen/conveyor/v1/task_pb.js";
import { STRATEGY_NAMES, strategyFromWire, strategyToWire, type StrategyName } from "../../src/rpc/wire-names.js";
import type { CliContext } from "../context.js";
import { UsageError } from "../failure.js";
import { printJson, printMessage, printLine, printTable, relativeTime } from "../output.js";

function strategyArg(value: string): LimitStrategy {
  const name = value.trim().toUpperCase().replace(/-/g, "_") as StrategyName;
  if (!STRATEGY_NAMES.includes(name)) throw new InvalidArgumentError(`use one of ${STRATEGY_NAMES.join(", ")}`);
  return strategyToWire(name);
}

interface RuleJson { name?: string; expression: string; maxRuns: number | string; limitStrategy: LimitStrategy }

/** The fields of one rule in --rules, as the JSON API spells them. */
const RULE_FIELDS = ["expression", "maxRuns", "limitStrategy", "name"] as const;
const RULES_SHAPE = 'a JSON array of {"expression", "maxRuns", "limitStrategy", "name"?}';

/** Checks each rule's fields here, so that a misnamed or missing one is named before anything is sent. */
function rulesArg(value: string): RuleJson[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (e) {
    throw new InvalidArgumentError(`not JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(parsed) || parsed.length === 0) throw new InvalidArgumentError(`expected ${RULES_SHAPE}, at least one`);
  return parsed.map((item: unknown, i) => {
    if (item === null || typeof item !== "object" || Array.isArray(item)) throw new InvalidArgumentError(`rule ${i}: expected an object`);
    const rule = item as Record<string, unknown>;
    const unknown = Object.keys(rule).find((k) => !(RULE_FIELDS as readonly string[]).includes(k));
    if (unknown !== undefined) throw new InvalidArgumentError(`rule ${i}: unknown field "${unknown}"; the fields are ${RULE_FIELDS.join(", ")}`);
    for (const required of ["expression", "maxRuns", "limitStrategy"]) {
      if (rule[required] === undefined) throw new InvalidArgumentError(`rule ${i}: "${required}" is missing`);
    }
    if (typeof rule.expression !== "string") throw new InvalidArgumentError(`rule ${i}: "expression" must be a string`);
    if (typeof rule.maxRuns !== "number" && typeof rule.maxRuns !== "string") {
      throw new InvalidArgumentError(`rule ${i}: "maxRuns" must be a number or a CEL expression string`);
    }
    if (rule.name !== undefined && typeof rule.name !== "string") throw new InvalidArgumentError(`rule ${i}: "name" must be a string`);
    let limitStrategy: LimitStrategy;
    try {
      limitStrategy = strategyArg(String(rule.limitStrategy));
    } catch (e) {
      throw new InvalidArgumentError(`rule ${i}: "limitStrategy": ${(e as Error).message}`);
    }
    return { expression: rule.expression, maxRuns: rule.maxRuns, limitStrategy, ...(rule.name === undefined ? {} : { name: rule.name }) };
  });
}

const toWire = (r: RuleJson) => ({
  name: r.name ?? "", expression: r.expression,
  maxRuns: typeof r.maxRuns === "number" ? r.maxRuns : 0,
  maxRunsExpression: typeof r.maxRuns === "string" ? r.maxRuns : "",
  strategy: r.limitStrategy,
});

const describeRule = (r: ConcurrencyRule) => [
  r.name || "-", r.expression, r.maxRunsExpression || String(r.maxRuns), strategyFromWire(r.strategy) ?? "?",
];

export function registerStrategyCommands(program: Command, ctx: CliContext): void {
  const group = program.command("strategy").description("concurrency strategies: CEL-keyed rules of task types");

  group
    .command("set")
    .description("set TYPE's concurrency rules (one rule from the flags, or several with --rules JSON)")
    .argument("<type>", "task type")
    .option("--expression <cel>", "key expression, e.g. input.userId or 'global'")
    .option("--max-runs <n|cel>", "limit per key: a number or a CEL expression")
    .option("--strategy <strategy>", STRATEGY_NAMES.join(" | "), strategyArg)
    .option("--name <name>", "share the rule (and its budget) with other types and queues")
    .option("--rules <json>", 'several rules: [{"expression":"input.tier","maxRuns":5,"limitStrategy":"GROUP_ROUND_ROBIN"}, ...]', rulesArg)
    .action(async (type: string, opts: { expression?: string; maxRuns?: string; strategy?: LimitStrategy; name?: string; rules?: RuleJson[] }, cmd: Command) => {
      const s = ctx.session(cmd);
      let rules;
      const single = { "--expression": opts.expression, "--max-runs": opts.maxRuns, "--strategy": opts.strategy, "--name": opts.name };
      if (opts.rules) {
        const both = Object.entries(single).filter(([, v]) => v !== undefined).map(([flag]) => flag);
        if (both.length > 0) throw new UsageError(`strategy set: --rules replaces ${both.join(", ")}; give one or the other`);
        rules = opts.rules.map(toWire);
      } else {
        if (!opts.expression || opts.maxRuns === undefined || opts.strategy === undefined) {
          const missing = Object.entries(single).filter(([flag, v]) => flag !== "--name" && !v && v !== 0).map(([flag]) => flag);
          throw new UsageError(`strategy set: missing ${missing.join(", ")} (give all three, or --rules)`);
        }
        const n = Number(opts.maxRuns);
        rules = [{
          name: opts.name ?? "", expression: opts.expression, strategy: opts.strategy,
          maxRuns: Number.isInteger(n) ? n : 0, maxRunsExpression: Number.isInteger(n) ? "" : opts.maxRuns,
        }];
      }
      const res = await s.client(AdminService).setStrategies({ type, rules }, s.call);
      if (s.json) return printMessage(s.io, SetStrategiesResponseSchema, res);
      printLine(s.io, `type ${type}: ${res.rules?.rules.length ?? 0} concurrency rule(s) set (applies to tasks enqueued from now on)`);
    });

  group
    .command("ls")
    .description("list the concurrency rules of every task type")
    .action(async (_opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).listStrategies({}, s.call);
      if (s.json) return printMessage(s.io, ListStrategiesResponseSchema, res);
      if (res.types.length === 0) return printLine(s.io, "no concurrency rules");
      const rows = res.types.flatMap((t) => t.rules.map((r, i) => [
        i === 0 ? t.type : "", String(i), ...describeRule(r), i === 0 ? `${t.source}, ${relativeTime(Number(t.updatedAtMs))}` : "",
      ]));
      printTable(s.io, ["TYPE", "#", "NAME", "KEY EXPRESSION", "MAX RUNS", "STRATEGY", "SET BY"], rows);
    });

  group
    .command("rm")
    .description("remove TYPE's concurrency rules")
    .argument("<type>", "task type")
    .action(async (type: string, _opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      await s.client(AdminService).deleteStrategies({ type }, s.call);
      if (s.json) return printJson(s.io, { type, removed: true });
      printLine(s.io, `type ${type}: concurrency rules removed`);
    });
}
