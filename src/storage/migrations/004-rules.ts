import type { Migration } from "./index.js";

/**
 * A released migration: its SQL (comments included) stays as shipped. Its second comment
 * is out of date; `task_type_rules.rules` actually holds
 * `{"source": "worker" | "operator", "rules": [{name, expression, maxRuns, maxRunsExpression, strategy}]}`
 * (every field present: `name` "" for a rule of one type, `maxRunsExpression` "" for a
 * fixed limit; see storage/rule-store.ts and RuleDef in grains/queue/rules.ts).
 */
export const m004Rules: Migration = {
  version: 4,
  name: "concurrency_rules",
  sql: `
-- The concurrency rules evaluated for a task at enqueue: JSON [{ruleId, key, maxRuns, strategy}].
ALTER TABLE tasks ADD COLUMN rules TEXT NOT NULL DEFAULT '[]';

-- The concurrency rules of each task type, as registered by workers or set by operators:
-- JSON [{name?, expression, maxRuns?, maxRunsExpression?, strategy}].
CREATE TABLE task_type_rules (
  type        TEXT PRIMARY KEY,
  rules       TEXT NOT NULL,
  updated_at  INTEGER NOT NULL
) STRICT;
`,
};
