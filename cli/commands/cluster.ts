/**
 * `conveyor cluster status`: the cluster's members as the answering node sees them (from
 * etcd; a ring of one for a single node), the ring version, etcd's health, and the
 * answering node's own load. `--partitions` adds partition → owner on that ring.
 */
import type { Command } from "commander";
import {
  AdminService, GetClusterInfoResponseSchema, GetClusterStatusResponseSchema, MemberState,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { toApiJson } from "../../src/rpc/json-dialect.js";
import type { CliContext } from "../context.js";
import { printFields, printJson, printLine, printTable, relativeTime } from "../output.js";

const STATE_NAMES: Record<MemberState, string> = {
  [MemberState.UNSPECIFIED]: "?", [MemberState.JOINING]: "joining", [MemberState.ACTIVE]: "active", [MemberState.DRAINING]: "draining",
};

export function registerClusterCommands(program: Command, ctx: CliContext): void {
  const group = program.command("cluster").description("the ring of nodes");

  group
    .command("status")
    .description("show the cluster's members (state, incarnation, lease left, partitions), the ring version, etcd's health, and the answering node's grains")
    .option("--partitions", "also list every partition and its owner on the ring")
    .action(async (opts: { partitions?: boolean }, cmd: Command) => {
      const s = ctx.session(cmd);
      const admin = s.client(AdminService);
      const [info, status] = await Promise.all([admin.getClusterInfo({}, s.call), admin.getClusterStatus({ withLeases: true }, s.call)]);
      if (s.json) return printJson(s.io, { ...(toApiJson(GetClusterInfoResponseSchema, info) as JsonObject), ...(toApiJson(GetClusterStatusResponseSchema, status) as JsonObject) });
      const healthy = status.etcd.filter((e) => e.healthy).length;
      printFields(s.io, [
        ["node", status.nodeId],
        ["started", relativeTime(Number(info.startedAtMs))],
        ["cluster", status.clustered ? `${status.clusterName} (etcd ${healthy}/${status.etcd.length} healthy)` : "single node (no cluster_etcd)"],
        ["phase", `${status.phase}${status.serving ? "" : " (not serving writes)"}${status.fences ? `, fenced ${status.fences}x since start` : ""}`],
        ["ring version", String(status.ringVersion)],
        ["partitions", String(status.partitions)],
        ["active grains", `${info.activeGrains}${info.activeQueues.length ? ` (${info.activeQueues.join(", ")})` : ""}`],
        ["parked lease calls", String(info.parkedLeases)],
      ]);
      if (status.clustered) {
        printLine(s.io, "note: membership only for now: queues are not yet placed on the ring; each node serves the queues sent to it");
      }
      printLine(s.io, "");
      printTable(s.io, ["MEMBER", "STATE", "INCARNATION", "LEASE", "OWNS", "GRPC", "HTTP", "VERSION", ""], status.members.map((m) => [
        m.nodeId, STATE_NAMES[m.state], m.incarnation ? m.incarnation.slice(0, 8) : "-",
        m.leaseLeftMs >= 0 ? `${(m.leaseLeftMs / 1000).toFixed(0)}s` : "-", String(m.partitionsOwned),
        m.grpcAddress, m.httpAddress, m.version, m.self ? "this node" : "",
      ]));
      if (opts.partitions) {
        printLine(s.io, "");
        printTable(s.io, ["PARTITION", "OWNER"], status.partitionOwners.map((owner, p) => [String(p), owner]));
      }
    });
}
