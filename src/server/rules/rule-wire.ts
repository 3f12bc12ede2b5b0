/** Concurrency rules: wire ↔ domain. */
import { create } from "@bufbuild/protobuf";
import type { RuleDef, Strategy, TypeRules } from "../../grains/queue/rules.js";
import { strategyFromWire, strategyToWire, type StrategyName } from "../../rpc/wire-names.js";
import { ConcurrencyRuleSchema, TaskTypeRulesSchema, type ConcurrencyRule, type TaskTypeRules } from "../../gen/conveyor/v1/task_pb.js";

/** The grain's strategy union and the wire enum's names are one list (compile-time check). */
const sameStrategies: [Strategy] extends [StrategyName] ? ([StrategyName] extends [Strategy] ? true : never) : never = true;
void sameStrategies;

/** Unknown strategies become "" and are refused by the registry's validation. */
export function ruleFromWire(r: ConcurrencyRule): RuleDef {
  return {
    name: r.name, expression: r.expression, maxRuns: r.maxRuns, maxRunsExpression: r.maxRunsExpression,
    strategy: strategyFromWire(r.strategy) ?? ("" as Strategy),
  };
}

export function ruleToWire(r: RuleDef): ConcurrencyRule {
  return create(ConcurrencyRuleSchema, {
    name: r.name, expression: r.expression, maxRuns: r.maxRuns, maxRunsExpression: r.maxRunsExpression, strategy: strategyToWire(r.strategy),
  });
}

export function typeRulesToWire(t: TypeRules): TaskTypeRules {
  return create(TaskTypeRulesSchema, { type: t.type, rules: t.rules.map(ruleToWire), source: t.source, updatedAtMs: BigInt(t.updatedAtMs) });
}
