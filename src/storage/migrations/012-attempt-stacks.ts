import type { Migration } from "./index.js";

/**
 * A failed attempt's stack trace, as the worker's SDK sent it (issue 38): kept beside the
 * attempt's error, "" for attempts that had none (older workers, and every attempt
 * recorded before this migration).
 */
export const m012AttemptStacks: Migration = {
  version: 12,
  name: "attempt_stacks",
  sql: `
ALTER TABLE attempts ADD COLUMN stack TEXT NOT NULL DEFAULT '';
`,
};
