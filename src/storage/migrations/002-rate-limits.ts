import type { Migration } from "./index.js";

export const m002RateLimits: Migration = {
  version: 2,
  name: "rate_limits",
  sql: `
-- Per-queue rate-limit override (token bucket); NULL = the server default.
ALTER TABLE queues ADD COLUMN rate_per_sec REAL;
ALTER TABLE queues ADD COLUMN rate_burst INTEGER;
`,
};
