/**
 * The cluster's answers in the SDK's shape (GetClusterStatus, DrainNode, MovePartition):
 * numbers instead of wire int64s, names instead of wire enums, ms durations. Kept apart
 * from admin.ts, which only calls.
 */
import {
  MemberState, type ClusterMemberStatus, type DrainNodeResponse, type GetClusterStatusResponse, type MovePartitionResponse,
  type PartitionState as WirePartitionState,
} from "../gen/conveyor/v1/admin_service_pb.js";

/** A member as the cluster sees it; "unknown" for a state a newer node sends. */
export interface MemberView {
  nodeId: string;
  /** True for the node that answered. */
  self: boolean;
  state: "joining" | "active" | "draining" | "unknown";
  incarnation: string;
  /** Lease time left in etcd; undefined when not asked (`withLeases`) or unknown. */
  leaseLeftMs: number | undefined;
  grpcAddress: string;
  httpAddress: string;
  version: string;
  partitionsOwned: number;
  /** An operator drained it: it serves forwarded calls but owns no partition. */
  drained: boolean;
}

export interface PartitionView {
  partition: number;
  /** The node that claimed it ("" while nobody has). */
  owner: string;
  /** The claim's fencing token (an etcd revision). */
  epoch: number;
  state: "owned" | "released" | "unclaimed" | (string & {});
  /** The owner's registration is gone: the partition waits for it. */
  ownerDown: boolean;
  /** Where an operator pinned it ("" when not pinned). */
  pinnedTo: string;
  /** With a changelog: the members keeping a warm copy. */
  standbys: string[];
  /** With `withLog`: the partition's last log sequence (0: none, or not asked). */
  logLastSeq: number;
}

export interface ClusterStatus {
  /** False for a single node: a ring of one, no etcd. */
  clustered: boolean;
  clusterName: string;
  /** The node that answered, and its phase: registering, joining, active, draining, fenced or stopped. */
  nodeId: string;
  phase: string;
  /** Whether the answering node may serve writes. */
  serving: boolean;
  fences: number;
  ringVersion: number;
  partitions: number;
  members: MemberView[];
  /** Who should hold each partition (indexed by partition). */
  partitionOwners: string[];
  /** Who does hold each partition, as recorded in etcd (indexed by partition). */
  partitionStates: PartitionView[];
  drainedNodes: string[];
  etcd: Array<{ endpoint: string; healthy: boolean }>;
  /** Undefined without a changelog (cluster_nats). */
  changelog: { healthy: boolean; stream: string; leader: string; error: string; standbyPartitions: number; standbyLagEntries: number } | undefined;
}

export interface DrainResult {
  nodeId: string;
  /** Whether the node is drained now (false after an undo). */
  drained: boolean;
  /** Partitions the node still holds. */
  partitionsLeft: number;
  /** A drain: the node holds nothing. An undo: always true. */
  finished: boolean;
  waitedMs: number;
}

export interface MoveResult {
  partition: number;
  /** Who held it when the call arrived ("" if nobody). */
  fromNodeId: string;
  /** Who holds it at the answer ("" if nobody yet). */
  heldBy: string;
  /** Its pin at the answer ("" after an unpin). */
  pinnedTo: string;
  /** The pinned node holds it, or nobody does yet; always true for an unpin. */
  finished: boolean;
  waitedMs: number;
}

const MEMBER_STATES = { [MemberState.JOINING]: "joining", [MemberState.ACTIVE]: "active", [MemberState.DRAINING]: "draining" } as const;

function toMemberView(m: ClusterMemberStatus): MemberView {
  return {
    nodeId: m.nodeId, self: m.self, state: (MEMBER_STATES as Record<number, MemberView["state"]>)[m.state] ?? "unknown",
    incarnation: m.incarnation, leaseLeftMs: m.leaseLeftMs < 0 ? undefined : m.leaseLeftMs, grpcAddress: m.grpcAddress,
    httpAddress: m.httpAddress, version: m.version, partitionsOwned: m.partitionsOwned, drained: m.drained,
  };
}

function toPartitionView(p: WirePartitionState): PartitionView {
  return {
    partition: p.partition, owner: p.owner, epoch: Number(p.epoch), state: p.state, ownerDown: p.ownerDown, pinnedTo: p.pinnedTo,
    standbys: [...p.standbys], logLastSeq: Number(p.logLastSeq),
  };
}

export function toClusterStatus(r: GetClusterStatusResponse): ClusterStatus {
  const log = r.changelog;
  return {
    clustered: r.clustered, clusterName: r.clusterName, nodeId: r.nodeId, phase: r.phase, serving: r.serving, fences: r.fences,
    ringVersion: Number(r.ringVersion), partitions: r.partitions, members: r.members.map(toMemberView),
    partitionOwners: [...r.partitionOwners], partitionStates: r.partitionStates.map(toPartitionView), drainedNodes: [...r.drainedNodes],
    etcd: r.etcd.map((e) => ({ endpoint: e.endpoint, healthy: e.healthy })),
    changelog: log?.enabled ? {
      healthy: log.healthy, stream: log.stream, leader: log.leader, error: log.error,
      standbyPartitions: log.standbyPartitions, standbyLagEntries: Number(log.standbyLagEntries),
    } : undefined,
  };
}

export const toDrainResult = (r: DrainNodeResponse): DrainResult => ({
  nodeId: r.nodeId, drained: r.drained, partitionsLeft: r.partitionsLeft, finished: r.finished, waitedMs: Number(r.waitedMs),
});

export const toMoveResult = (r: MovePartitionResponse): MoveResult => ({
  partition: r.partition, fromNodeId: r.fromNodeId, heldBy: r.heldBy, pinnedTo: r.pinnedTo, finished: r.finished, waitedMs: Number(r.waitedMs),
});
