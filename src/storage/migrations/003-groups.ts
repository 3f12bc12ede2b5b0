import type { Migration } from "./index.js";

export const m003Groups: Migration = {
  version: 3,
  name: "groups",
  sql: `
-- The fired batch a pending or active group member belongs to ('' = none).
ALTER TABLE tasks ADD COLUMN batch_id TEXT NOT NULL DEFAULT '';

-- Group threshold overrides: per (queue, group), or queue-wide with grp = ''.
CREATE TABLE group_configs (
  queue         TEXT NOT NULL,
  grp           TEXT NOT NULL,
  max_size      INTEGER NOT NULL,
  max_delay_ms  INTEGER NOT NULL,
  grace_ms      INTEGER NOT NULL,
  PRIMARY KEY (queue, grp)
) STRICT;
`,
};
