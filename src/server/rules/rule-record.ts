/**
 * A task type's rules as stored in etcd (`rules/<type>`): JSON with a version field, so a
 * node can tell a record it understands from one a newer conveyor wrote. JSON rather than
 * protobuf because the record is the domain `TypeRules` (the strategy by name, the source,
 * the time of the write), readable with `etcdctl get`, and the wire enum's numbers are
 * not what a stored record should depend on.
 *
 *   { "v": 1, "type": "email", "source": "worker" | "operator", "updatedAtMs": 1700000000000,
 *     "rules": [{ "name": "", "expression": "input.user", "maxRuns": 1, "maxRunsExpression": "", "strategy": "GROUP_ROUND_ROBIN" }] }
 *
 * A change of meaning is a new `v`; a reader refuses a version it does not know (the
 * record is then left out of its cache and logged, never half-read).
 */
import type { RuleDef, RuleSource, Strategy, TypeRules } from "../../grains/queue/rules.js";

export const RULE_RECORD_VERSION = 1;

export function encodeRuleRecord(t: TypeRules): string {
  return JSON.stringify({
    v: RULE_RECORD_VERSION, type: t.type, source: t.source, updatedAtMs: t.updatedAtMs,
    rules: t.rules.map((r) => ({ name: r.name, expression: r.expression, maxRuns: r.maxRuns, maxRunsExpression: r.maxRunsExpression, strategy: r.strategy })),
  });
}

/** The rules of `type` stored as `text`; throws naming what is wrong with a record this version cannot read. */
export function decodeRuleRecord(type: string, text: string): TypeRules {
  const v = JSON.parse(text) as { v?: unknown; type?: unknown; source?: unknown; updatedAtMs?: unknown; rules?: unknown };
  if (v.v !== RULE_RECORD_VERSION) throw new Error(`rules of type ${JSON.stringify(type)} are stored as record version ${String(v.v)}; this node reads version ${RULE_RECORD_VERSION}`);
  if (v.type !== type) throw new Error(`the record under rules/${type} names type ${JSON.stringify(v.type)}`);
  if (v.source !== "worker" && v.source !== "operator") throw new Error(`rules of type ${JSON.stringify(type)}: unknown source ${JSON.stringify(v.source)}`);
  if (!Array.isArray(v.rules)) throw new Error(`rules of type ${JSON.stringify(type)}: no rule list`);
  const rules: RuleDef[] = (v.rules as Array<Record<string, unknown>>).map((r) => ({
    name: String(r["name"] ?? ""), expression: String(r["expression"] ?? ""), maxRuns: Number(r["maxRuns"] ?? 0),
    maxRunsExpression: String(r["maxRunsExpression"] ?? ""), strategy: String(r["strategy"] ?? "") as Strategy,
  }));
  return { type, rules, source: v.source as RuleSource, updatedAtMs: Number(v.updatedAtMs ?? 0) };
}
