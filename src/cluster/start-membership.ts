/**
 * Joins the cluster named in the config, or stands alone: the one decision point between
 * a single node and a cluster member. With no etcd endpoints the node is a ring of one
 * (SoloMembership) and nothing else changes; with endpoints it registers in etcd
 * (ClusterMember on EtcdCoordination) and start-up waits until it is active.
 *
 * A cluster member also reads and watches the partition records (partition-owners.ts):
 * what it holds, what it claims, and where everything else is served.
 */
import { randomUUID } from "node:crypto";
import { systemClock, type Clock } from "../base/clock.js";
import { ClusterMember, SoloMembership, type ClusterLogger, type MembershipStatusSource } from "./cluster-member.js";
import type { Coordination, MemberRecord } from "./coordination.js";
import { rewatchMs } from "./membership.js";
import { PartitionOwners, type PartitionLogGate } from "./partition-owners.js";
import { PlacementControl } from "./placement-control.js";

export interface MembershipSettings {
  /** etcd client URLs, comma-separated; empty: a single node. */
  etcd: string;
  cluster: string;
  partitions: number;
  ttlMs: number;
  self: Omit<MemberRecord, "state" | "incarnation">;
  logger: ClusterLogger;
  clock?: Clock;
  /**
   * Runs on the cluster's coordination before this node registers (so before it is active
   * and serves): the node reads the cluster-wide state it must hold first (task-type rules).
   */
  beforeJoin?: (coordination: Coordination, deadlineMs: number) => Promise<void>;
  /** The partitions' changelog (cluster_nats), when the cluster has one. */
  log?: PartitionLogGate;
}

/** The endpoints of a `cluster_etcd` value (comma-separated URLs; a bare host:port gets http://). */
export function parseEndpoints(value: string): string[] {
  return value.split(",").map((e) => e.trim()).filter(Boolean).map((e) => (/^[a-z]+:\/\//.test(e) ? e : `http://${e}`));
}

/** A started membership: what GetClusterStatus reads, the partitions (a cluster member's), and how to leave. */
export type StartedMembership = MembershipStatusSource & {
  /** The member's partitions (undefined for a single node, whose ownership is SoloOwnership). */
  owners: PartitionOwners | undefined;
  /** The cluster member itself (undefined for a single node). */
  member: ClusterMember | undefined;
  /** The operator's drains and moves (undefined for a single node). */
  placement: PlacementControl | undefined;
  stop(): Promise<void>;
};

/** The node's membership, started: resolves once a cluster member is active and reads its partitions; rejects (ClusterJoinError) when it may not join. */
export async function startMembership(settings: MembershipSettings): Promise<StartedMembership> {
  const endpoints = parseEndpoints(settings.etcd);
  if (endpoints.length === 0) {
    const solo = new SoloMembership(settings.self, settings.partitions);
    return Object.assign(solo, { owners: undefined, member: undefined, placement: undefined, stop: async () => {} });
  }
  const clock = settings.clock ?? systemClock;
  // Loaded here: a single node never needs the etcd client (~0.1 s of start-up).
  const { EtcdCoordination } = await import("./etcd-coordination.js");
  const { answeringUnavailable } = await import("./etcd-answers.js");
  // etcd's failures reach callers as UNAVAILABLE / ETCD_UNAVAILABLE, never INTERNAL (etcd-answers.ts).
  const coordination = answeringUnavailable(
    new EtcdCoordination({ endpoints, cluster: settings.cluster, callTimeoutMs: Math.max(1_000, Math.floor(settings.ttlMs / 2)) }));
  const member = new ClusterMember({
    coordination, clock, cluster: settings.cluster, partitions: settings.partitions,
    ttlMs: settings.ttlMs, self: settings.self, newIncarnation: randomUUID, logger: settings.logger,
  });
  const owners = new PartitionOwners({
    coordination, membership: member, partitions: settings.partitions, clock, logger: settings.logger, rewatchMs: rewatchMs(settings.ttlMs),
    ...(settings.log ? { log: settings.log } : {}),
  });
  try {
    await settings.beforeJoin?.(coordination, clock.nowMs() + settings.ttlMs * 2 + 5_000);
    await member.start();
    await owners.start();
  } catch (err) {
    await owners.stop().catch(() => {});
    await member.stop().catch(() => {});
    throw err;
  }
  const stopMember = member.stop.bind(member);
  const memberStatus = member.status.bind(member);
  const placement = new PlacementControl({ coordination, owners, members: () => member.members(), clock });
  return Object.assign(member, {
    owners,
    member,
    placement,
    // The owners the placement wants (pins and drains honoured), not the bare ring's.
    status: async (withLeases = false) => ({
      ...(await memberStatus(withLeases)), owners: owners.desiredOwners(), partitionStates: owners.states(), drained: [...owners.overrides.drains].sort(),
    }),
    stop: async () => {
      await owners.stop();
      await stopMember();
    },
  });
}
