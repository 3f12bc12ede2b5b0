/**
 * `conveyor cluster status`: the cluster's members as the answering node sees them (from
 * etcd; a ring of one for a single node), the ring version, etcd's health, and the
 * answering node's own load. `--partitions` adds every partition: its holder (as claimed
 * in etcd), epoch and state, its pin, and the owner the placement would give it. Drain
 * and move are cluster-placement.ts's.
 */
import type { Command } from "commander";
import {
  AdminService, type ChangelogStatus, GetClusterInfoResponseSchema, GetClusterStatusResponseSchema, MemberState,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { toApiJson } from "../../src/rpc/json-dialect.js";
import type { CliContext } from "../context.js";
import { printFields, printJson, printLine, printTable, relativeTime } from "../output.js";
import { registerPlacementCommands } from "./cluster-placement.js";

const STATE_NAMES: Record<MemberState, string> = {
  [MemberState.UNSPECIFIED]: "?", [MemberState.JOINING]: "joining", [MemberState.ACTIVE]: "active", [MemberState.DRAINING]: "draining",
};

/** The changelog's line of `cluster status`: off, or its stream, leader and this node's standbys. */
function changelogLine(c: ChangelogStatus | undefined): string {
  if (!c?.enabled) return "off (no cluster_nats: a crashed node's partitions wait for it)";
  const health = c.healthy ? `${c.stream}, leader ${c.leader}` : `${c.stream} NOT ANSWERING (${c.error})`;
  return `${health}; this node stands by for ${c.standbyPartitions} partition(s), ${c.standbyLagEntries} entries behind`;
}

export function registerClusterCommands(program: Command, ctx: CliContext): void {
  const group = program.command("cluster").description("the ring of nodes");

  group
    .command("status")
    .description("show the cluster's members (state, incarnation, lease left, partitions), the ring version, etcd's health, and the answering node's grains")
    .option("--partitions", "also list every partition: who holds it, at which epoch, its pin, and who the placement would give it to")
    .action(async (opts: { partitions?: boolean }, cmd: Command) => {
      const s = ctx.session(cmd);
      const admin = s.client(AdminService);
      const [info, status] = await Promise.all([admin.getClusterInfo({}, s.call), admin.getClusterStatus({ withLeases: true, withLog: opts.partitions === true }, s.call)]);
      if (s.json) return printJson(s.io, { ...(toApiJson(GetClusterInfoResponseSchema, info) as JsonObject), ...(toApiJson(GetClusterStatusResponseSchema, status) as JsonObject) });
      const healthy = status.etcd.filter((e) => e.healthy).length;
      printFields(s.io, [
        ["node", status.nodeId],
        ["started", relativeTime(Number(info.startedAtMs))],
        ["cluster", status.clustered ? `${status.clusterName} (etcd ${healthy}/${status.etcd.length} healthy)` : "single node (no cluster_etcd)"],
        ["phase", `${status.phase}${status.serving ? "" : " (not serving writes)"}${status.fences ? `, fenced ${status.fences}x since start` : ""}`],
        ["changelog", changelogLine(status.changelog)],
        ["ring version", String(status.ringVersion)],
        ["partitions", String(status.partitions)],
        ["active grains", `${info.activeGrains}${info.activeQueues.length ? ` (${info.activeQueues.join(", ")})` : ""}`],
        ["parked lease calls", String(info.parkedLeases)],
      ]);
      const down = status.partitionStates.filter((p) => p.ownerDown);
      if (down.length > 0) {
        const nodes = [...new Set(down.map((p) => p.owner))].join(", ");
        printLine(s.io, `warning: ${down.length} partition(s) wait for node(s) that are down (${nodes}): their queues answer OWNER_DOWN until those nodes return`);
      }
      if (status.drainedNodes.length > 0) {
        printLine(s.io, `drained (own no partition until undrained with conveyor cluster drain NODE --undo): ${status.drainedNodes.join(", ")}`);
      }
      const pinned = status.partitionStates.filter((p) => p.pinnedTo !== "");
      if (pinned.length > 0 && !opts.partitions) printLine(s.io, `pinned partitions: ${pinned.map((p) => `${p.partition}→${p.pinnedTo}`).join(", ")}`);
      printLine(s.io, "");
      printTable(s.io, ["MEMBER", "STATE", "INCARNATION", "LEASE", "OWNS", "GRPC", "HTTP", "VERSION", ""], status.members.map((m) => [
        m.nodeId, `${STATE_NAMES[m.state]}${m.drained ? " (drained)" : ""}`, m.incarnation ? m.incarnation.slice(0, 8) : "-",
        m.leaseLeftMs >= 0 ? `${(m.leaseLeftMs / 1000).toFixed(0)}s` : "-", String(m.partitionsOwned),
        m.grpcAddress, m.httpAddress, m.version, m.self ? "this node" : "",
      ]));
      if (opts.partitions) {
        printLine(s.io, "");
        const logged = status.changelog?.enabled === true;
        printTable(s.io, ["PARTITION", "HELD BY", "EPOCH", "STATE", "PINNED TO", "DESIRED OWNER", ...(logged ? ["LOG SEQ", "STANDBYS", `${status.nodeId}'S COPY`] : [])],
          status.partitionStates.map((p) => [
            String(p.partition), p.owner || "-", p.epoch > 0n ? String(p.epoch) : "-", p.ownerDown ? "owner down" : p.state,
            p.pinnedTo || "-", status.partitionOwners[p.partition] ?? "-",
            ...(logged ? [p.logLastSeq > 0n ? String(p.logLastSeq) : "-", p.standbys.join(", ") || "-",
              p.standbys.includes(status.nodeId) ? `at ${p.standbySeq}, ${p.standbyLagEntries} behind` : "-"] : []),
          ]));
      }
    });

  registerPlacementCommands(group, ctx);
}
