import type { Migration } from "./index.js";

export const m006AttemptEnds: Migration = {
  version: 6,
  name: "attempt_ends",
  sql: `
-- When the node ends an active task's attempt (timeout or deadline); 0 = no limit or
-- not active. Durable so that a restart does not give a running attempt more time.
ALTER TABLE tasks ADD COLUMN attempt_ends_at INTEGER NOT NULL DEFAULT 0;
`,
};
