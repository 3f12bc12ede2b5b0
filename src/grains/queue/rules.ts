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


/**
 * What a cancel strategy decides when `newcomer` arrives under a rule key: the tasks to
 * cancel, in order (`newcomer` included when it is the one refused). Pure: `running` and
 * `queued` are the key's other active and pending tasks, oldest first. GROUP_ROUND_ROBIN
 * decides nothing at arrival (the task waits its turn).
 */
export function cancelledAtArrival<T>(strategy: Strategy, maxRuns: number, newcomer: T, running: readonly T[], queued: readonly T[]): T[] {
  switch (strategy) {
    case "GROUP_ROUND_ROBIN":
      return [];
    case "CANCEL_NEWEST":
      return running.length + queued.length >= maxRuns ? [newcomer] : [];
    case "CANCEL_IN_PROGRESS": {
      // Keep the newest max: cancel the oldest (running first, they are older) to make room.
      const live = [...running, ...queued];
      const doomed: T[] = [];
      for (let i = 0; live.length - i + 1 > maxRuns && i < live.length; i++) doomed.push(live[i]!);
      return doomed;
    }
    case "CANCEL_QUEUED_EXCEPT_NEWEST":
    case "CANCEL_QUEUED_EXCEPT_OLDEST": {
      // Waiting tasks beyond the free slots are "queued"; keep max of them.
      const waiting = [...queued, newcomer];
      const free = Math.max(0, maxRuns - running.length);
      const backlog = waiting.slice(free);
      const excess = backlog.length - maxRuns;
      if (excess <= 0) return [];
      return strategy === "CANCEL_QUEUED_EXCEPT_NEWEST" ? backlog.slice(0, excess) : backlog.slice(backlog.length - excess);
    }
    default: {
      const never: never = strategy;
      throw new Error(`unknown strategy ${String(never)}`);
    }
  }
}
