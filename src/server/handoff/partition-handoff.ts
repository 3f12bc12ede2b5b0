/**
 * Hands one partition, with its rows, from this node to another (join, drain, move):
 *
 * 1. Stop serving it: calls for it now wait (`beginMove`; forwarder.ts parks them up to
 *    `cluster_handoff_wait`), parked Lease calls on its queues end at once, empty
 *    and marked `relocated`, so their workers poll again without backing off, and the
 *    writes already made are committed.
 * 2. Drop its grains from memory (their timers stop here) and snapshot its rows into a
 *    SQLite file (storage/partition-rows.ts).
 * 3. Send the file, in chunks, to the receiver (ClusterService.AcceptPartition), which
 *    loads the rows (invisible there until it claims the partition).
 * 4. Mark the partition released *to the receiver* in etcd, at this node's epoch: from
 *    then on only the receiver may claim it (placement.ts), and it does so at once.
 * 5. Drop the rows here and let the parked calls route again (to the receiver).
 *
 * If anything fails before step 4, the partition stays this node's: its calls are
 * served here again (the grains come back on the next call or reminder) and the rows the
 * receiver loaded stay invisible there (it does not hold the partition). After step 4
 * the move is done whatever happens next; a failure to drop the rows here leaves stale
 * rows that this node never shows (router.ts hides rows of partitions it does not hold).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { PartitionOwners } from "../../cluster/partition-owners.js";
import { ClusterService } from "../../gen/conveyor/v1/cluster_service_pb.js";
import type { DescMethod } from "@bufbuild/protobuf";
import type { Peers } from "../forwarding/peers.js";
import type { PartitionRows } from "../../storage/partition-rows.js";

/** Bytes of snapshot per AcceptPartition call (below the node's 4 MiB request limit). */
export const HANDOFF_CHUNK_BYTES = 2 * 1024 * 1024;
const ACCEPT_TIMEOUT_MS = 30_000;

export interface HandoffDeps {
  owners: PartitionOwners;
  rows: PartitionRows;
  peers: Peers;
  /** Ends parked Lease calls on the queues `moving` names, each answered `relocated` (the lease broker). */
  releaseParked: (moving: (queue: string) => boolean) => void;
  /** Drops a queue's grain from memory, with no reminder kept (the grain host). */
  retireGrain: (queue: string) => void;
  /** Resolves once every write of partition p so far is durable (committed, and on its changelog if any). */
  committed: (p: number) => Promise<void>;
  /** The sequence of p's last changelog entry (0 without a changelog): what the snapshot's rows are at. */
  logSeq: (p: number) => number;
  logger: Logger;
  /** Called once per finished handoff: cause, duration and tasks moved (metrics). */
  onHandedOff?: (info: HandoffResult) => void;
}

export interface HandoffResult {
  partition: number;
  to: string;
  cause: string;
  tasks: number;
  bytes: number;
  ms: number;
}

const acceptPartition = (ClusterService.methods as DescMethod[]).find((m) => m.name === "AcceptPartition")!;

export async function handOffPartition(p: number, to: { nodeId: string; address: string }, cause: string, deps: HandoffDeps): Promise<HandoffResult> {
  const { owners, rows, logger } = deps;
  const route = owners.route(p);
  if (route.kind !== "local") throw new Error(`partition ${p} is not held here (${route.kind})`);
  const epoch = route.epoch;
  const started = performance.now();
  owners.beginMove(p);
  let released = false;
  try {
    const queues = rows.queueNames().filter((q) => owners.partitionOf(q) === p);
    deps.releaseParked((queue) => owners.partitionOf(queue) === p);
    await deps.committed(p);
    for (const queue of queues) deps.retireGrain(queue);
    // A timer's turn may have run while that was awaited; with the grains gone, none can
    // now. The snapshot must not hold a turn the log has not acknowledged: the receiver's
    // fence would refuse its append, and its rows would be on the receiver only.
    await deps.committed(p);
    const snapshot = rows.snapshot(queues);
    const logSeq = BigInt(deps.logSeq(p));
    const transferId = randomUUID();
    const chunks = Math.max(1, Math.ceil(snapshot.bytes.length / HANDOFF_CHUNK_BYTES));
    for (let i = 0; i < chunks; i++) {
      await deps.peers.call(to.address, ClusterService, acceptPartition, {
        partition: p, fromNode: owners.nodeId, epoch: BigInt(epoch), transferId, chunk: i, last: i === chunks - 1,
        data: snapshot.bytes.subarray(i * HANDOFF_CHUNK_BYTES, (i + 1) * HANDOFF_CHUNK_BYTES), logSeq,
      }, { from: owners.nodeId, route: `${p}:${epoch}:${owners.ringVersion}`, deadlineMs: Date.now() + ACCEPT_TIMEOUT_MS });
    }
    released = await owners.release(p, epoch, to.nodeId);
    if (!released) throw new Error(`partition ${p} was no longer held at epoch ${epoch} when it was to be released`);
    try {
      rows.drop(queues);
    } catch (err) {
      logger.warn({ err, partition: p }, "handed off, but could not drop the partition's rows here (they stay invisible)");
    }
    const result = { partition: p, to: to.nodeId, cause, tasks: snapshot.tasks, bytes: snapshot.bytes.length, ms: performance.now() - started };
    logger.info(result, "partition handed off");
    deps.onHandedOff?.(result);
    return result;
  } finally {
    owners.endMove(p);
    if (!released) logger.warn({ partition: p, to: to.nodeId }, "partition handoff failed; still serving it here");
  }
}
