/**
 * Task ids the server makes carry their partition, so any node routes a GetTask,
 * CancelTask or WaitTask straight to the owner without a lookup.
 *
 * Format: the shape of a version-4 UUID (what users store in UUID columns), laid out as
 *   pppp tttt-tttt-4ttt-Vrrr-rrrrrrrrrrrr
 * p: the partition (16 bits, 0..4095 fits); t: the minting instant in ms (44 bits, until
 * the year 2527); 4: the version nibble; V r: the variant and 62 random bits. In a single
 * node it is just a UUID. The partition in an id is a hint, not a proof: a
 * caller-chosen UUID parses too. So a router that does not find the task at the hinted
 * owner asks the other members (forwarder.ts), which is also how caller-chosen ids of
 * any shape are found: they are unique per queue (as before), and found by asking.
 *
 * Why the instant: the id is the key of the tasks' `id` index and of `attempts`, and a
 * random key puts every new task's entries on a random B-tree page, one more page per
 * task for the commit to write to the WAL (and later to the data file), and for the
 * retention janitor's deletes to dirty again. Ids that sort by creation fill the last
 * pages: measured in process (bench store), SQLite cost per task 98 → 65 µs of CPU, WAL
 * frames per enqueued task 1.2 → 0.13 (docs/decisions/0028-time-ordered-task-ids.md). The instant is
 * visible in the id, as in a UUIDv7; ids are not secrets (access goes through roles).
 * Within one ms ids are unordered (random): they still share the last page.
 */
import { randomUUID } from "node:crypto";

/** Where an id is assembled: written in place, then read out as one flat string. */
const scratch = Buffer.alloc(36);

/** A new server-made task id in partition `p`, minted at `nowMs`. */
export function mintTaskId(p: number, nowMs: number): string {
  const t = Math.max(0, Math.floor(nowMs)).toString(16).padStart(11, "0").slice(-11);
  // xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx: its dashes, version, variant and random tail stay.
  scratch.write(randomUUID(), 0, "latin1");
  scratch.write(p.toString(16).padStart(4, "0"), 0, "latin1");
  scratch.write(t.slice(0, 4), 4, "latin1");
  scratch.write(t.slice(4, 8), 9, "latin1");
  scratch.write(t.slice(8), 15, "latin1");
  // One flat string: a concatenation of slices would keep its pieces alive in every id a
  // grain holds (~120 B instead of ~56: bench/results/2026-12-performance-diary.md, "A million pending tasks").
  return scratch.toString("latin1");
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The partition an id names, if it has the server's shape and names one of `partitions`. */
export function partitionHint(id: string, partitions: number): number | undefined {
  if (!UUID_V4.test(id)) return undefined;
  const p = parseInt(id.slice(0, 4), 16);
  return p < partitions ? p : undefined;
}
