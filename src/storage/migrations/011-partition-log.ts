import type { Migration } from "./index.js";

/**
 * Where this node's rows of a partition stand on its changelog (cluster part 2): a row
 * (p, seq) says the rows of p's queues here are exactly the log's entries up to `seq`,
 * no more and no fewer, so catching up before a claim reads only what follows. No row:
 * not known (the rows may be ahead of the log, as an owner's are while it appends, or
 * stale), so a claim rebuilds p from the log. See storage/log-positions.ts.
 */
export const m011PartitionLog: Migration = {
  version: 11,
  name: "partition_log",
  sql: `
CREATE TABLE partition_log (
  partition INTEGER PRIMARY KEY,
  seq INTEGER NOT NULL
) STRICT;
`,
};
