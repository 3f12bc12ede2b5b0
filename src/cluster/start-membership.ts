/**
 * Joins the cluster named in the config, or stands alone: the one decision point between
 * a single node and a cluster member. With no etcd endpoints the node is a ring of one
 * (SoloMembership) and nothing else changes; with endpoints it registers in etcd
 * (ClusterMember on EtcdCoordination) and start-up waits until it is active.
 *
 * What membership does today: register, keep alive, watch, self-fence and re-register,
 * report. It does not yet place queues: every node still serves the queues sent to it
 * from its own data (ownership claims, forwarding and handoff come next).
 */
import { randomUUID } from "node:crypto";
import { systemClock, type Clock } from "../base/clock.js";
import { ClusterMember, SoloMembership, type ClusterLogger, type MembershipStatusSource } from "./cluster-member.js";
import type { MemberRecord } from "./coordination.js";
import { EtcdCoordination } from "./etcd-coordination.js";

export interface MembershipSettings {
  /** etcd client URLs, comma-separated; empty: a single node. */
  etcd: string;
  cluster: string;
  partitions: number;
  ttlMs: number;
  self: Omit<MemberRecord, "state" | "incarnation">;
  logger: ClusterLogger;
  clock?: Clock;
}

/** The endpoints of a `cluster_etcd` value (comma-separated URLs; a bare host:port gets http://). */
export function parseEndpoints(value: string): string[] {
  return value.split(",").map((e) => e.trim()).filter(Boolean).map((e) => (/^[a-z]+:\/\//.test(e) ? e : `http://${e}`));
}

/** The node's membership, started: resolves once a cluster member is active; rejects (ClusterJoinError) when it may not join. */
export async function startMembership(settings: MembershipSettings): Promise<MembershipStatusSource & { stop(): Promise<void> }> {
  const endpoints = parseEndpoints(settings.etcd);
  if (endpoints.length === 0) {
    const solo = new SoloMembership(settings.self, settings.partitions);
    return Object.assign(solo, { stop: async () => {} });
  }
  const coordination = new EtcdCoordination({ endpoints, cluster: settings.cluster, callTimeoutMs: Math.max(1_000, Math.floor(settings.ttlMs / 2)) });
  const member = new ClusterMember({
    coordination, clock: settings.clock ?? systemClock, cluster: settings.cluster, partitions: settings.partitions,
    ttlMs: settings.ttlMs, self: settings.self, newIncarnation: randomUUID, logger: settings.logger,
  });
  try {
    await member.start();
  } catch (err) {
    await member.stop().catch(() => {});
    throw err;
  }
  return member;
}
