/**
 * A node's entry into its cluster: registration in etcd once the ports are bound (the
 * member record advertises them), after the cluster's task-type rules are read. A node
 * without `cluster_etcd` stands alone, on the same path.
 */
import type * as grpc from "@grpc/grpc-js";
import type { Server as HttpServer } from "node:http";
import type { Logger } from "pino";
import type { ClusterMember } from "../cluster/cluster-member.js";
import type { Coordination } from "../cluster/coordination.js";
import type { PartitionLogGate, PartitionOwners } from "../cluster/partition-owners.js";
import type { PlacementControl } from "../cluster/placement-control.js";
import { startMembership } from "../cluster/start-membership.js";
import type { DataDir } from "../storage/data-dir.js";
import { packageInfo } from "../version.js";
import type { MembershipLink } from "./cluster-status.js";
import type { NodeConfig } from "./config.js";
import type { ClusterRules } from "./rules/cluster-rules.js";

/** The node's bound ports: what the member record advertises, and what a refused join closes. */
export interface BoundPorts {
  grpcServer: grpc.Server;
  grpcAddress: string;
  httpServer: HttpServer;
  httpAddress: string;
}

/**
 * Registers in the cluster (cluster_etcd set) or stands alone, once the ports are bound
 * (the member record advertises them). A refusal closes the ports and fails the start.
 * Returns the member's partitions (a cluster member) and how to leave.
 */
export async function joinCluster(
  config: NodeConfig, transports: BoundPorts, dataDir: DataDir, logger: Logger, link: MembershipLink, rules: ClusterRules | undefined,
  log: PartitionLogGate | undefined,
): Promise<{ owners: PartitionOwners | undefined; member: ClusterMember | undefined; placement: PlacementControl | undefined; leave: () => Promise<void> }> {
  try {
    const membership = await startMembership({
      etcd: config.clusterEtcd, cluster: config.clusterName, partitions: config.clusterPartitions, ttlMs: config.clusterMemberTtlMs, logger,
      ...(log ? { log } : {}),
      ...(rules ? { beforeJoin: (coordination: Coordination, deadlineMs: number) => rules.start(coordination, deadlineMs) } : {}),
      self: {
        nodeId: config.nodeId, grpc: config.clusterAdvertise || transports.grpcAddress, http: transports.httpAddress,
        version: packageInfo().version, dataDirId: dataDir.identity.id, startedAtMs: Date.now(),
      },
    });
    link.link(membership);
    return { owners: membership.owners, member: membership.member, placement: membership.placement, leave: () => membership.stop() };
  } catch (error) {
    await rules?.stop();
    transports.grpcServer.forceShutdown();
    transports.httpServer.closeAllConnections();
    await new Promise<void>((resolve) => transports.httpServer.close(() => resolve()));
    throw error;
  }
}
