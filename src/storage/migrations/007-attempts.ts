import type { Migration } from "./index.js";

export const m007Attempts: Migration = {
  version: 7,
  name: "attempts",
  sql: `
-- When the running attempt of an active task started and the worker id of the Lease call
-- that started it ('' = none named). Written with the lease (activation), so recording
-- the attempt when it ends needs no read of anything but the row's own values.
ALTER TABLE tasks ADD COLUMN attempt_started_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN attempt_worker TEXT NOT NULL DEFAULT '';
-- How many attempts the task has started: the running (or last) attempt's number, also
-- written with the lease, so an attempt's row is numbered without reading the table.
ALTER TABLE tasks ADD COLUMN attempt_number INTEGER NOT NULL DEFAULT 0;

-- Each task's attempts (its most recent ones; the node drops the oldest beyond a limit).
-- number: 1 for the task's first lease. outcome: succeeded, failed, failed_no_retry,
-- timed_out, lease_expired, released, cancelled (grains/queue/attempts.ts).
CREATE TABLE attempts (
  task_id     TEXT NOT NULL,
  number      INTEGER NOT NULL,
  started_at  INTEGER NOT NULL,
  ended_at    INTEGER NOT NULL,
  worker_id   TEXT NOT NULL,
  outcome     TEXT NOT NULL,
  error       TEXT NOT NULL,
  PRIMARY KEY (task_id, number)
) STRICT, WITHOUT ROWID;

-- A task's attempts go with it, however it is deleted (an operator, a bulk action, a
-- removed queue, the retention janitor).
CREATE TRIGGER tasks_delete_attempts AFTER DELETE ON tasks
BEGIN
  DELETE FROM attempts WHERE task_id = OLD.id;
END;
`,
};
