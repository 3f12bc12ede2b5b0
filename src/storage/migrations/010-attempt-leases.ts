import type { Migration } from "./index.js";

/**
 * The lease each attempt ended under, so that a worker's settle sent again (its first
 * answer lost, say while the task's partition moved to another node) is recognised as
 * the one already applied and answered OK instead of LEASE_NOT_HELD. '' for attempts
 * recorded before this migration and for attempts that ended without a lease.
 */
export const m010AttemptLeases: Migration = {
  version: 10,
  name: "attempt_leases",
  sql: `
ALTER TABLE attempts ADD COLUMN lease_id TEXT NOT NULL DEFAULT '';
`,
};
