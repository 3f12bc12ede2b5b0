/**
 * Task ids the server makes carry their partition, so any node routes a GetTask,
 * CancelTask or WaitTask straight to the owner without a lookup.
 *
 * Format: a version-4 UUID whose first 16 bits are the partition (0..4095 fits; the
 * other 106 bits stay random). It keeps the shape users store in UUID columns, and in a
 * single node it is just a UUID. The partition in an id is a hint, not a proof: a
 * caller-chosen UUID parses too. So a router that does not find the task at the hinted
 * owner asks the other members (forwarder.ts), which is also how caller-chosen ids of
 * any shape are found: they are unique per queue (as before), and found by asking.
 */
import { randomUUID } from "node:crypto";

/** A new server-made task id in partition `p`. */
export function mintTaskId(p: number): string {
  return p.toString(16).padStart(4, "0") + randomUUID().slice(4);
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The partition an id names, if it has the server's shape and names one of `partitions`. */
export function partitionHint(id: string, partitions: number): number | undefined {
  if (!UUID_V4.test(id)) return undefined;
  const p = parseInt(id.slice(0, 4), 16);
  return p < partitions ? p : undefined;
}
