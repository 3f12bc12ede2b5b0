/**
 * The cluster's metrics, on the node's registry. Labels are bounded: member states,
 * handoff causes and RPC method names (a fixed set), never a queue, node or task.
 * A single node exports them too (one member, every partition held, nothing forwarded),
 * so dashboards and alerts need no special case.
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { MemberState } from "../cluster/coordination.js";

export interface ClusterMetricSources {
  /** Members by state, as this node sees them. */
  members: () => Record<MemberState, number>;
  ringVersion: () => number;
  partitionsHeld: () => number;
}

export class ClusterMetrics {
  readonly forwarded: Counter<"method">;
  readonly wrongOwner: Counter<"method">;
  readonly claims: Counter;
  readonly handoffs: Counter<"cause" | "outcome">;
  readonly handoffSeconds: Histogram<"cause">;
  readonly failovers: Counter;

  constructor(registry: Registry, sources: () => ClusterMetricSources | undefined) {
    const registers = [registry];
    this.forwarded = new Counter({ name: "conveyor_cluster_forwarded_calls_total", help: "Calls this node forwarded to the node holding their queue, by method.", labelNames: ["method"] as const, registers });
    this.wrongOwner = new Counter({ name: "conveyor_cluster_wrong_owner_total", help: "Forwarded calls this node answered WRONG_OWNER (it no longer held the partition), by method.", labelNames: ["method"] as const, registers });
    this.claims = new Counter({ name: "conveyor_cluster_partition_claims_total", help: "Partitions this node claimed in etcd (each claim is a new epoch).", registers });
    this.handoffs = new Counter({ name: "conveyor_cluster_handoffs_total", help: "Partitions this node handed to another node, by cause (rebalance, drain, move) and outcome (ok, failed).", labelNames: ["cause", "outcome"] as const, registers });
    this.handoffSeconds = new Histogram({ name: "conveyor_cluster_handoff_seconds", help: "Time a partition was not served during a handoff this node made (its calls waited meanwhile).", labelNames: ["cause"] as const, buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30], registers });
    this.failovers = new Counter({ name: "conveyor_cluster_failovers_total", help: "Partitions this node took over from a holder that was gone (crashed, or cut off past its lease), rebuilt from the changelog.", registers });
    new Gauge({
      name: "conveyor_cluster_members", help: "Cluster members by state, as this node sees them.", labelNames: ["state"] as const, registers,
      collect() {
        const s = sources();
        for (const [state, n] of Object.entries(s?.members() ?? { joining: 0, active: 1, draining: 0 })) this.set({ state }, n);
      },
    });
    new Gauge({ name: "conveyor_cluster_ring_version", help: "The etcd revision of the last membership change (1 for a single node).", registers, collect() { this.set(sources()?.ringVersion() ?? 1); } });
    new Gauge({ name: "conveyor_cluster_partitions_held", help: "Partitions this node holds now.", registers, collect() { this.set(sources()?.partitionsHeld() ?? 0); } });
  }
}
