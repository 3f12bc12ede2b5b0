import type { Migration } from "./index.js";

export const m005SlotLimits: Migration = {
  version: 5,
  name: "slot_limits",
  sql: `
-- Dynamic per-key limits of concurrency rules (a key's limit is its newest task's), kept
-- while the key has unfinished tasks. scope: the queue for a type's own rules, '' for
-- shared (named) rules, which are counted node-wide.
CREATE TABLE slot_limits (
  scope     TEXT NOT NULL,
  slot      TEXT NOT NULL,
  max_runs  INTEGER NOT NULL,
  PRIMARY KEY (scope, slot)
) STRICT;
`,
};
