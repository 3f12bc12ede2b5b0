/**
 * The node-to-node service: the receiving side of a handoff, and the shared-rule ledgers
 * held here (ReportSlots). For a handoff: Chunks of one transfer are
 * gathered in memory (a partition is tens of MB at most: its rows within retention), up
 * to HANDOFF_TRANSFER_MAX_BYTES per transfer and HANDOFF_BUFFERED_MAX_BYTES in all, and
 * the last one loads the rows in one write. The first chunk is refused unless etcd (as
 * this node sees it) records the partition as held by the sender and not by this node. The rows stay invisible here until this node
 * claims the partition, which it does as soon as etcd shows it released to this node
 * (partition-owners.ts); if the sender gives up before releasing, they are never shown,
 * and a later handoff of the same partition replaces them.
 */
import { ConveyorError, invalidField } from "../../base/errors.js";
import type { ClusterService } from "../../gen/conveyor/v1/cluster_service_pb.js";
import type { UnaryImpl } from "../../rpc/service-definition.js";
import type { LogPositions } from "../../storage/log-positions.js";
import type { PartitionRows } from "../../storage/partition-rows.js";
import type { TaskStore } from "../../storage/task-store.js";
import type { Logger } from "pino";
import type { Route } from "../../cluster/placement.js";
import type { LedgerHost } from "../ledger/ledger-host.js";

/** Transfers not finished after this long are dropped (their sender gave up). */
const TRANSFER_STALE_MS = 120_000;
/**
 * Bytes one unfinished transfer may hold here: a partition's rows within retention are
 * tens of MB; past this the transfer is dropped (RESOURCE_EXHAUSTED) and the sender keeps
 * serving the partition. Senders send HANDOFF_CHUNK_BYTES (2 MiB) per chunk.
 */
export const HANDOFF_TRANSFER_MAX_BYTES = 256 * 1024 * 1024;
/** Bytes all unfinished transfers together may hold here (two transfers of the largest size). */
export const HANDOFF_BUFFERED_MAX_BYTES = 2 * HANDOFF_TRANSFER_MAX_BYTES;

interface Transfer {
  partition: number;
  from: string;
  chunks: Uint8Array[];
  bytes: number;
  startedAtMs: number;
}

export interface ClusterServiceDeps {
  rows: PartitionRows;
  partitions: number;
  partitionOf(queue: string): number;
  /** Where a loaded partition's rows stand on its changelog (set with the rows, when the sender names a log sequence). */
  positions: LogPositions;
  /** Told which queues' rows a load replaced (their grains here, if any, describe the old rows). */
  store: Pick<TaskStore, "forgetQueues">;
  /**
   * Does this node hold p (its claim recorded and, with a changelog, fenced)? Its rows of
   * p are then the partition's own, and no load replaces them (absent: never, for tests
   * of the load alone).
   */
  holds?(p: number): boolean;
  /**
   * Resolves when this node's changelog answers a read of p now; rejects (UNAVAILABLE)
   * when it does not. A partition handed to a node that cannot read the log cannot be
   * claimed there (the claim fences the log first), so the handoff is refused at its first
   * chunk and the sender keeps serving it: the network fault test saw a node back from a
   * partition, whose nats-server was still rejoining, take its partitions back and leave
   * them unclaimed for 21 s. Absent without a changelog.
   */
  logAnswers?(p: number): Promise<void>;
  /**
   * Where this node routes p (its view of etcd's records). A transfer's first chunk is
   * taken only from the node recorded as p's holder, so chunks nobody is handing to this
   * node are never buffered (absent: every transfer is taken, for tests of the load alone).
   */
  routeOf?(p: number): Route;
  logger: Logger;
  nowMs: () => number;
  ledgers: LedgerHost;
}

export function clusterService(deps: ClusterServiceDeps): UnaryImpl<typeof ClusterService> {
  const transfers = new Map<string, Transfer>();
  /** Refuses, on a transfer's first chunk, a partition that is not being handed to this node. */
  const refuseUnexpected = (p: number, fromNode: string) => {
    // Rows of a partition this node holds are the partition's only copy besides the log.
    if (deps.holds?.(p)) throw new ConveyorError("FAILED_PRECONDITION", "PLACEMENT_REFUSED", `partition ${p} is held by this node; a handoff from ${fromNode} cannot replace its rows`);
    const route = deps.routeOf?.(p);
    const why = route && senderMismatch(route, fromNode);
    if (why) throw new ConveyorError("FAILED_PRECONDITION", "PLACEMENT_REFUSED", `partition ${p} is not coming to this node from ${JSON.stringify(fromNode)}: ${why}`);
  };
  return {
    async acceptPartition(call) {
      const r = call.request;
      if (r.partition >= deps.partitions) throw invalidField("partition", `is ${r.partition}; this cluster has ${deps.partitions}`);
      if (r.transferId === "") throw invalidField("transfer_id", "is required");
      const now = deps.nowMs();
      for (const [id, t] of transfers) if (now - t.startedAtMs > TRANSFER_STALE_MS) transfers.delete(id);
      let transfer = transfers.get(r.transferId);
      if (!transfer) {
        if (r.chunk !== 0) throw new ConveyorError("FAILED_PRECONDITION", "INVALID_FIELD", `transfer ${r.transferId}: chunk ${r.chunk} before chunk 0`);
        refuseUnexpected(r.partition, r.fromNode);
        await deps.logAnswers?.(r.partition);
        // One transfer per partition: a sender that starts again gave the earlier one up.
        for (const [id, t] of transfers) if (t.partition === r.partition) transfers.delete(id);
        transfer = { partition: r.partition, from: r.fromNode, chunks: [], bytes: 0, startedAtMs: now };
        transfers.set(r.transferId, transfer);
      }
      if (r.chunk !== transfer.chunks.length) {
        transfers.delete(r.transferId);
        throw new ConveyorError("FAILED_PRECONDITION", "INVALID_FIELD", `transfer ${r.transferId}: chunk ${r.chunk} out of order (expected ${transfer.chunks.length})`);
      }
      const buffered = [...transfers.values()].reduce((sum, t) => sum + t.bytes, 0);
      if (transfer.bytes + r.data.byteLength > HANDOFF_TRANSFER_MAX_BYTES || buffered + r.data.byteLength > HANDOFF_BUFFERED_MAX_BYTES) {
        transfers.delete(r.transferId);
        throw new ConveyorError("RESOURCE_EXHAUSTED", "TRANSFER_TOO_LARGE",
          `transfer ${r.transferId} of partition ${r.partition}: chunk ${r.chunk} would hold more than ${transfer.bytes + r.data.byteLength > HANDOFF_TRANSFER_MAX_BYTES
            ? `${HANDOFF_TRANSFER_MAX_BYTES} bytes for one transfer` : `${HANDOFF_BUFFERED_MAX_BYTES} bytes for all unfinished transfers`} here; the transfer is dropped`,
          "data");
      }
      // The decoded bytes as they are (a view of the received message): no second copy held.
      transfer.chunks.push(r.data);
      transfer.bytes += r.data.byteLength;
      if (!r.last) return {};
      transfers.delete(r.transferId);
      // Rows of a partition this node holds are the partition's only copy besides the log:
      // a sender that believes it still holds p (a stale view) must never replace them.
      if (deps.holds?.(r.partition)) {
        throw new ConveyorError("FAILED_PRECONDITION", "PLACEMENT_REFUSED", `partition ${r.partition} is held by this node; a handoff from ${r.fromNode} cannot replace its rows`);
      }
      let loaded;
      // Every other row of the partition here is stale too (an earlier stay's, or a crashed
      // stay's that another node took over from the log): replaced in the same write.
      const stale = deps.rows.queueNames().filter((q) => deps.partitionOf(q) === r.partition);
      try {
        const logSeq = Number(r.logSeq);
        loaded = deps.rows.load(Buffer.concat(transfer.chunks), stale, () => {
          if (logSeq > 0) deps.positions.set(r.partition, logSeq);
          else deps.positions.clear(r.partition);
        });
      } catch (error) {
        if (error instanceof ConveyorError) throw error;
        throw invalidField("data", `is not a partition snapshot (${error instanceof Error ? error.message : String(error)}); nothing was loaded`);
      }
      // Grains of these queues still in memory here (this node held the partition before and
      // lost it without handing it off: paused or cut off past its lease, then taken over
      // from the log) were built on the rows just replaced: they go, and the claim that
      // follows activates the queues from the loaded rows.
      deps.store.forgetQueues(new Set([...loaded.queues, ...stale]));
      deps.logger.info({ partition: r.partition, from: r.fromNode, epoch: String(r.epoch), tasks: loaded.tasks, queues: loaded.queues.length, logSeq: String(r.logSeq) },
        "received a partition's rows");
      return { tasks: BigInt(loaded.tasks) };
    },

    // Shared-rule ledgers held here (ledger/ledger-host.ts).
    async reportSlots(call) {
      const r = call.request;
      const answer = await deps.ledgers.report({
        fromNode: r.fromNode, seq: Number(r.seq), partitions: r.partitions,
        slots: r.slots.map((s) => ({
          slot: s.slot, held: s.held, inflight: s.inflight, want: s.want,
          ...(s.limitSetAtMs !== undefined ? { limit: s.limit, limitSetAtMs: Number(s.limitSetAtMs) } : {}),
        })),
      });
      return {
        grants: answer.grants.map((g) => ({ slot: g.slot, grant: g.grant, ...(g.limit !== undefined ? { limit: g.limit } : {}) })),
        refusedPartitions: answer.refusedPartitions,
      };
    },
  };
}

/**
 * Why `route` says p is not being handed here by `fromNode`, or undefined when it is held
 * by `fromNode` (its registration may look gone here for a moment: it is sending, so it is not).
 */
function senderMismatch(route: Route, fromNode: string): string | undefined {
  switch (route.kind) {
    case "remote":
    case "down":
      return route.nodeId === fromNode ? undefined : `this node sees it held by ${JSON.stringify(route.nodeId)}`;
    case "local":
    case "claim":
    case "moving":
      return "this node holds it or is claiming it";
    case "none":
      return "this node sees no holder for it";
  }
}
