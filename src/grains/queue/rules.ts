/**
 * Concurrency rules as the grain sees them: already evaluated for one task (the server
 * evaluates the CEL expressions at enqueue), so the grain only counts and decides.
 */
export type Strategy =
  | "GROUP_ROUND_ROBIN"
  | "CANCEL_IN_PROGRESS"
  | "CANCEL_NEWEST"
  | "CANCEL_QUEUED_EXCEPT_NEWEST"
  | "CANCEL_QUEUED_EXCEPT_OLDEST";

export const STRATEGIES: readonly Strategy[] = [
  "GROUP_ROUND_ROBIN", "CANCEL_IN_PROGRESS", "CANCEL_NEWEST", "CANCEL_QUEUED_EXCEPT_NEWEST", "CANCEL_QUEUED_EXCEPT_OLDEST",
];

/** One rule of a task: the budget it counts against, under which key, limit and strategy. */
export interface TaskRule {
  /** `${type}#${index}` for a rule of one task type; `@${name}` for a shared (named) rule. */
  ruleId: string;
  key: string;
  /** The key's limit as computed for this task (a key's limit is its newest task's). */
  maxRuns: number;
  strategy: Strategy;
}

/** A concurrency rule as declared for a task type (before evaluation). */
export interface RuleDef {
  /** Non-empty: a shared rule (one budget across every type and queue that names it). */
  name: string;
  expression: string;
  maxRuns: number;
  /** Non-empty: the limit is computed per task. */
  maxRunsExpression: string;
  strategy: Strategy;
}

export type RuleSource = "worker" | "operator";

export interface TypeRules {
  type: string;
  rules: RuleDef[];
  source: RuleSource;
  updatedAtMs: number;
}

/** Durable storage of type rules (a port, implemented in src/storage). */
export interface RuleStore {
  loadAll(): TypeRules[];
  save(rules: TypeRules): void;
  delete(type: string): boolean;
}

