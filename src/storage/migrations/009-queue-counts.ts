import type { Migration } from "./index.js";

/**
 * Task counts per (queue, state), kept by triggers on `tasks` so that ListQueues, the
 * depth gauges and the start-up scan read a few rows per queue instead of counting every
 * retained task (issue 15). Triggers rather than application code: every path that
 * changes a task (grain effects, bulk actions, queue removal, the retention janitor,
 * future ones) goes through the table, so the counts cannot miss one, and they change in
 * the same transaction as the row, so a kill -9 cannot split them. Their cost on the hot
 * path is measured in docs/decisions/0014-task-counts-by-triggers.md.
 */
export const m009QueueCounts: Migration = {
  version: 9,
  name: "queue_counts",
  sql: `
-- How many tasks of each queue are in each state. A row may hold 0 (readers skip those);
-- removing a queue deletes its rows.
CREATE TABLE queue_counts (
  queue  TEXT NOT NULL,
  state  TEXT NOT NULL,
  n      INTEGER NOT NULL,
  PRIMARY KEY (queue, state)
) STRICT, WITHOUT ROWID;

-- The counts of the tasks already stored (one pass over the (queue, state) index).
INSERT INTO queue_counts (queue, state, n) SELECT queue, state, COUNT(*) FROM tasks GROUP BY queue, state;

CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks
BEGIN
  INSERT INTO queue_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks
BEGIN
  UPDATE queue_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
END;

-- Only a statement that names state (or queue) in its SET, and only when the value changes.
CREATE TRIGGER tasks_count_update AFTER UPDATE OF queue, state ON tasks
  WHEN OLD.state IS NOT NEW.state OR OLD.queue IS NOT NEW.queue
BEGIN
  UPDATE queue_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
  INSERT INTO queue_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
`,
};
