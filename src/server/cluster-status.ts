/** GetClusterStatus: the membership as this node sees it, translated to the wire (no logic here). */
import type { MembershipStatusSource } from "../cluster/cluster-member.js";
import type { MemberState } from "../cluster/coordination.js";
import { AdminService, MemberState as WireMemberState } from "../gen/conveyor/v1/admin_service_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import type { ChangelogView } from "./changelog-link.js";

const WIRE_STATE: Record<MemberState, WireMemberState> = {
  joining: WireMemberState.JOINING, active: WireMemberState.ACTIVE, draining: WireMemberState.DRAINING,
};

/** The changelog's part of the status (server/changelog-link.ts); absent without cluster_nats. */
export interface ChangelogStatusSource {
  status(withLog: boolean): Promise<ChangelogView>;
}

export function clusterStatusHandler(source: MembershipStatusSource, changelog?: ChangelogStatusSource): UnaryImpl<typeof AdminService>["getClusterStatus"] {
  return async (call) => {
    const [status, etcd, log] = await Promise.all([source.status(call.request.withLeases), source.etcdHealth(), changelog?.status(call.request.withLog)]);
    // Partitions a member holds (claimed, as recorded), not the ones the ring would give it.
    const owned = new Map<string, number>();
    for (const p of status.partitionStates ?? []) if (p.state === "owned") owned.set(p.owner, (owned.get(p.owner) ?? 0) + 1);
    return {
      clustered: source.clustered, clusterName: status.cluster, nodeId: status.nodeId, phase: status.phase,
      incarnation: status.incarnation, serving: status.serving, fences: status.fences, ringVersion: BigInt(status.ringVersion),
      partitions: status.partitions, partitionOwners: [...status.owners], etcd,
      partitionStates: (status.partitionStates ?? []).map((p) => {
        const l = log?.partitions[p.partition];
        return {
          ...p, epoch: BigInt(p.epoch), standbys: l?.standbys ?? [], logLastSeq: BigInt(l?.logLastSeq ?? 0),
          standbySeq: BigInt(l?.standbySeq ?? 0), standbyLagEntries: BigInt(l?.standbyLagEntries ?? 0),
        };
      }),
      changelog: log
        ? {
          enabled: true, healthy: log.healthy, stream: log.stream, leader: log.leader, error: log.error,
          standbyPartitions: log.standbyPartitions, standbyLagEntries: BigInt(log.standbyLagEntries),
        }
        : { enabled: false },
      drainedNodes: status.drained ?? [],
      members: status.members.map((m) => ({
        nodeId: m.entry.record.nodeId, self: m.self, state: WIRE_STATE[m.entry.record.state], incarnation: m.entry.record.incarnation,
        leaseLeftMs: m.leaseLeftMs ?? -1, grpcAddress: m.entry.record.grpc, httpAddress: m.entry.record.http,
        version: m.entry.record.version, partitionsOwned: owned.get(m.entry.record.nodeId) ?? 0, memberRevision: BigInt(m.entry.createRevision),
        drained: (status.drained ?? []).includes(m.entry.record.nodeId),
      })),
    };
  };
}

/**
 * The node's membership, linked once it has joined: the gRPC port is bound (and so its
 * address known, which the member record advertises) before the node registers, so a
 * call in between sees the node as "registering".
 */
export class MembershipLink implements MembershipStatusSource {
  private source: MembershipStatusSource | undefined;
  constructor(private readonly nodeId: string, readonly clustered: boolean) {}

  link(source: MembershipStatusSource): void {
    this.source = source;
  }

  status(withLeases: boolean) {
    if (this.source) return this.source.status(withLeases);
    return Promise.resolve({
      cluster: "", nodeId: this.nodeId, phase: "registering" as const, incarnation: "", serving: false, fences: 0, ringVersion: 0,
      partitions: 0, members: [], owners: [],
    });
  }

  etcdHealth() {
    return this.source ? this.source.etcdHealth() : Promise.resolve([]);
  }
}
