import type { Migration } from "./index.js";

export const m001Init: Migration = {
  version: 1,
  name: "init",
  sql: `
-- One row per queue that has ever been used; holds its durable settings.
CREATE TABLE queues (
  name        TEXT PRIMARY KEY,
  paused      INTEGER NOT NULL DEFAULT 0,
  -- Per-key concurrency limit; NULL = unlimited.
  key_limit   INTEGER,
  created_at  INTEGER NOT NULL
) STRICT;

-- Every task, in every state. Instants are Unix epoch ms; 0 means "not set".
CREATE TABLE tasks (
  id                TEXT PRIMARY KEY,
  queue             TEXT NOT NULL,
  type              TEXT NOT NULL,
  payload           BLOB NOT NULL,
  content_type      TEXT NOT NULL,
  metadata          TEXT,
  state             TEXT NOT NULL,
  priority          INTEGER NOT NULL,
  seq               INTEGER NOT NULL,
  max_retry         INTEGER NOT NULL,
  retried           INTEGER NOT NULL,
  created_at        INTEGER NOT NULL,
  ready_at          INTEGER NOT NULL,
  timeout_ms        INTEGER NOT NULL,
  deadline_at       INTEGER NOT NULL,
  expires_at        INTEGER NOT NULL,
  unique_key        TEXT NOT NULL,
  unique_until      INTEGER NOT NULL,
  concurrency_key   TEXT NOT NULL,
  grp               TEXT NOT NULL,
  backoff_base_ms   INTEGER NOT NULL,
  backoff_max_ms    INTEGER NOT NULL,
  retention_ms      INTEGER NOT NULL,
  last_error        TEXT NOT NULL DEFAULT '',
  last_failed_at    INTEGER NOT NULL DEFAULT 0,
  finished_at       INTEGER NOT NULL DEFAULT 0,
  result            BLOB,
  cancel_reason     TEXT NOT NULL DEFAULT '',
  lease_id          TEXT NOT NULL DEFAULT '',
  lease_expires_at  INTEGER NOT NULL DEFAULT 0,
  -- When the janitor may delete a finished task; 0 while unfinished.
  purge_at          INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Activation (unfinished tasks of a queue), state counts, and paging by state.
CREATE INDEX tasks_by_queue_state ON tasks (queue, state);
-- Retention purge.
CREATE INDEX tasks_by_purge_at ON tasks (purge_at) WHERE purge_at > 0;
`,
};
