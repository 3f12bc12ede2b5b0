/** `conveyor cluster status`: the ring and the answering node's load. */
import type { Command } from "commander";
import { AdminService, GetClusterInfoResponseSchema } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import type { CliContext } from "../context.js";
import { printFields, printJson, printMessage, printLine, printTable, relativeTime } from "../output.js";

export function registerClusterCommands(program: Command, ctx: CliContext): void {
  const group = program.command("cluster").description("the ring of nodes");

  group
    .command("status")
    .description("show the ring's members and the answering node's grains and parked lease calls")
    .action(async (_opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).getClusterInfo({}, s.call);
      if (s.json) return printMessage(s.io, GetClusterInfoResponseSchema, res);
      printFields(s.io, [
        ["node", res.nodeId],
        ["started", relativeTime(Number(res.startedAtMs))],
        ["ring version", String(res.ringVersion)],
        ["active grains", `${res.activeGrains}${res.activeQueues.length ? ` (${res.activeQueues.join(", ")})` : ""}`],
        ["parked lease calls", String(res.parkedLeases)],
      ]);
      printLine(s.io, "");
      printTable(s.io, ["MEMBER", ""], res.members.map((m) => [m.nodeId, m.self ? "this node" : ""]));
    });
}
