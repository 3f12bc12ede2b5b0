/** Concurrency rules: wire ↔ domain. */
import { create } from "@bufbuild/protobuf";
import type { RuleDef, Strategy, TypeRules } from "../../grains/queue/rules.js";
import { ConcurrencyRuleSchema, LimitStrategy, TaskTypeRulesSchema, type ConcurrencyRule, type TaskTypeRules } from "../../gen/conveyor/v1/task_pb.js";

const TO_DOMAIN: Partial<Record<LimitStrategy, Strategy>> = {
  [LimitStrategy.GROUP_ROUND_ROBIN]: "GROUP_ROUND_ROBIN",
  [LimitStrategy.CANCEL_IN_PROGRESS]: "CANCEL_IN_PROGRESS",
  [LimitStrategy.CANCEL_NEWEST]: "CANCEL_NEWEST",
  [LimitStrategy.CANCEL_QUEUED_EXCEPT_NEWEST]: "CANCEL_QUEUED_EXCEPT_NEWEST",
  [LimitStrategy.CANCEL_QUEUED_EXCEPT_OLDEST]: "CANCEL_QUEUED_EXCEPT_OLDEST",
};

/** Unknown strategies become "" and are refused by the registry's validation. */
export function ruleFromWire(r: ConcurrencyRule): RuleDef {
  return {
    name: r.name, expression: r.expression, maxRuns: r.maxRuns, maxRunsExpression: r.maxRunsExpression,
    strategy: TO_DOMAIN[r.strategy] ?? ("" as Strategy),
  };
}

export function ruleToWire(r: RuleDef): ConcurrencyRule {
  const strategy = Number(Object.entries(TO_DOMAIN).find(([, v]) => v === r.strategy)?.[0] ?? 0) as LimitStrategy;
  return create(ConcurrencyRuleSchema, { name: r.name, expression: r.expression, maxRuns: r.maxRuns, maxRunsExpression: r.maxRunsExpression, strategy });
}

export function typeRulesToWire(t: TypeRules): TaskTypeRules {
  return create(TaskTypeRulesSchema, { type: t.type, rules: t.rules.map(ruleToWire), source: t.source, updatedAtMs: BigInt(t.updatedAtMs) });
}
