/**
 * Numbered schema migrations, applied in order, each in its own transaction, and
 * recorded in `schema_migrations`. They are TypeScript modules holding SQL (rather than
 * .sql files) so that `tsc` ships them in dist/ with no copy step.
 * Never edit a released migration: add the next number.
 */
import { m001Init } from "./001-init.js";
import { m002RateLimits } from "./002-rate-limits.js";
import { m003Groups } from "./003-groups.js";
import { m004Rules } from "./004-rules.js";
import { m005SlotLimits } from "./005-slot-limits.js";
import { m006AttemptEnds } from "./006-attempt-ends.js";
import { m007Attempts } from "./007-attempts.js";
import { m008Schedules } from "./008-schedules.js";
import { m009QueueCounts } from "./009-queue-counts.js";
import { m010AttemptLeases } from "./010-attempt-leases.js";
import { m011PartitionLog } from "./011-partition-log.js";
import { m012AttemptStacks } from "./012-attempt-stacks.js";

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [m001Init, m002RateLimits, m003Groups, m004Rules, m005SlotLimits, m006AttemptEnds,
  m007Attempts, m008Schedules, m009QueueCounts, m010AttemptLeases, m011PartitionLog,
  m012AttemptStacks];
