import type { Migration } from "./index.js";

export const m008Schedules: Migration = {
  version: 8,
  name: "schedules",
  sql: `
-- Periodic tasks (grains/queue/schedules.ts), written only by their queue's grain.
-- task: the task template as JSON (everything but the payload); a cadence is either
-- cron (+ time_zone, '' = UTC) or interval_ms counted from anchor_at.
-- last_tick_at is the cursor: every tick at or before it was handled (enqueued or skipped),
-- written in the same transaction as the tick's task.
CREATE TABLE schedules (
  queue            TEXT NOT NULL,
  name             TEXT NOT NULL,
  task             TEXT NOT NULL,
  payload          BLOB NOT NULL,
  cron             TEXT NOT NULL DEFAULT '',
  time_zone        TEXT NOT NULL DEFAULT '',
  interval_ms      INTEGER NOT NULL DEFAULT 0,
  anchor_at        INTEGER NOT NULL DEFAULT 0,
  missed           TEXT NOT NULL,
  skip_if_running  INTEGER NOT NULL,
  paused           INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  last_tick_at     INTEGER NOT NULL,
  last_task_id     TEXT NOT NULL,
  PRIMARY KEY (queue, name)
) STRICT;
`,
};
