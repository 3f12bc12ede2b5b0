/** `conveyor group set|ls|rm`: group aggregation thresholds, and live groups. */
import type { Command } from "commander";
import {
  AdminService,
  GroupState,
  ListGroupConfigsResponseSchema,
  type ListGroupConfigsResponse,
  ListGroupsResponseSchema,
  SetGroupConfigResponseSchema,
  type GroupConfig,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { formatDurationMs } from "../../src/base/duration.js";
import type { CliContext } from "../context.js";
import { UsageError } from "../failure.js";
import { intArg, positiveDurationArg } from "../options.js";
import { printJson, printMessage, printLine, printTable, relativeTime, warnSimilarQueue } from "../output.js";

const groupLabel = (group: string) => (group === "" ? "(queue default)" : group);
const thresholds = (c: GroupConfig | undefined) =>
  c ? [String(c.maxSize), formatDurationMs(Number(c.maxDelayMs)), formatDurationMs(Number(c.graceMs))] : ["-", "-", "-"];

/** The thresholds in force for `group` of `queue`: its override, else the queue's default, else the server's. */
function effectiveConfig(list: ListGroupConfigsResponse, queue: string, group: string): Pick<GroupConfig, "maxSize" | "maxDelayMs" | "graceMs"> {
  const find = (g: string) => list.configs.find((c) => c.queue === queue && c.group === g);
  const config = find(group) ?? find("") ?? list.serverDefault;
  return config ?? { maxSize: 0, maxDelayMs: 0n, graceMs: 0n };
}

export function registerGroupCommands(program: Command, ctx: CliContext): void {
  const group = program.command("group").description("group aggregation: thresholds per group or queue, and live groups");

  group
    .command("set")
    .description("set the thresholds of one group of QUEUE (--group) or QUEUE's default for all its groups")
    .argument("<queue>", "queue name")
    .option("--group <group>", "the group; omit for the queue-wide default", "")
    .option("--max-size <n>", "fire once this many members accumulate (at least 1)", intArg(1, 1_000_000, "must be a whole number of at least 1"))
    .option("--max-delay <duration>", "fire this long after the first member, e.g. 2m", positiveDurationArg)
    .option("--grace <duration>", "fire this long after the last member, e.g. 5s", positiveDurationArg)
    .addHelpText("after", "\nA threshold left out keeps its current value (the group's override, else the queue's default, else the server's).")
    .action(async (queue: string, opts: { group: string; maxSize?: number; maxDelay?: number; grace?: number }, cmd: Command) => {
      if (opts.maxSize === undefined && opts.maxDelay === undefined && opts.grace === undefined) {
        throw new UsageError("group set: give at least one of --max-size, --max-delay, --grace");
      }
      const s = ctx.session(cmd);
      const admin = s.client(AdminService);
      // The API sets all three thresholds at once: read the ones in force and change only those given.
      const current = effectiveConfig(await admin.listGroupConfigs({ queue }, s.call), queue, opts.group);
      const res = await admin.setGroupConfig({
        config: {
          queue, group: opts.group,
          maxSize: opts.maxSize ?? current.maxSize,
          maxDelayMs: opts.maxDelay === undefined ? current.maxDelayMs : BigInt(opts.maxDelay),
          graceMs: opts.grace === undefined ? current.graceMs : BigInt(opts.grace),
        },
      }, s.call);
      warnSimilarQueue(s.io, queue, res.similarQueue);
      if (s.json) return printMessage(s.io, SetGroupConfigResponseSchema, res);
      const [size, delay, grace] = thresholds(res.config);
      printLine(s.io, `queue ${queue}, group ${groupLabel(opts.group)}: max size ${size}, max delay ${delay}, grace ${grace} (applies now)`);
    });

  group
    .command("ls")
    .description("list group overrides (with --live: groups filling up and batches waiting for a worker)")
    .argument("[queue]", "only this queue")
    .option("--live", "show live groups instead of overrides")
    .action(async (queue: string | undefined, opts: { live?: boolean }, cmd: Command) => {
      const s = ctx.session(cmd);
      const admin = s.client(AdminService);
      if (opts.live) {
        const res = await admin.listGroups({ queue: queue ?? "" }, s.call);
        if (s.json) return printMessage(s.io, ListGroupsResponseSchema, res);
        if (res.groups.length === 0) return printLine(s.io, "no live groups");
        const now = Date.now();
        printTable(s.io, ["QUEUE", "GROUP", "TYPE", "STATE", "SIZE", "FIRST", "LAST", "FIRES", "WORKER"],
          res.groups.map((g) => [
            g.queue, g.group, g.type, g.state === GroupState.READY ? "fired, waiting" : "aggregating", String(g.size),
            g.firstMemberAtMs ? relativeTime(Number(g.firstMemberAtMs), now) : "-",
            g.lastMemberAtMs ? relativeTime(Number(g.lastMemberAtMs), now) : "-",
            g.nextFireAtMs ? relativeTime(Number(g.nextFireAtMs), now) : "-",
            g.workerAvailable ? "yes" : "NONE: no connected worker has a batch handler",
          ]));
        return;
      }
      const res = await admin.listGroupConfigs({ queue: queue ?? "" }, s.call);
      if (s.json) return printMessage(s.io, ListGroupConfigsResponseSchema, res);
      const rows = res.configs.map((c) => [c.queue, groupLabel(c.group), ...thresholds(c)]);
      rows.push(["(server)", "(default)", ...thresholds(res.serverDefault)]);
      printTable(s.io, ["QUEUE", "GROUP", "MAX SIZE", "MAX DELAY", "GRACE"], rows, ["left", "left", "right", "right", "right"]);
    });

  group
    .command("rm")
    .description("remove the override of one group of QUEUE (--group) or QUEUE's default")
    .argument("<queue>", "queue name")
    .option("--group <group>", "the group; omit for the queue-wide default", "")
    .action(async (queue: string, opts: { group: string }, cmd: Command) => {
      const s = ctx.session(cmd);
      await s.client(AdminService).deleteGroupConfig({ queue, group: opts.group }, s.call);
      if (s.json) return printJson(s.io, { queue, group: opts.group, removed: true });
      printLine(s.io, `queue ${queue}, group ${groupLabel(opts.group)}: override removed`);
    });
}
