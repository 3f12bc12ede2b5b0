import type { Migration } from "./index.js";

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
