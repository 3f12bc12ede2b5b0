/**
 * `conveyor cluster drain NODE [--undo] [--no-wait]`, `conveyor cluster move P --to NODE`
 * and `conveyor cluster move P --unpin`: the operator's placement overrides (kept in
 * etcd; every node's rebalancer does the moving). By default the command waits until
 * the partitions have moved (up to --wait), printing progress while it waits: the first
 * call waits a few seconds on the server, then the command follows GetClusterStatus, so a
 * long drain shows how many partitions are still to move without repeating the action.
 */
import type { Command } from "commander";
import {
  AdminService, DrainNodeResponseSchema, MovePartitionResponseSchema, type GetClusterStatusResponse,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { toApiJson } from "../../src/rpc/json-dialect.js";
import type { CliContext, Session } from "../context.js";
import { ConveyorError } from "../../src/base/errors.js";
import { durationArg, intArg } from "../options.js";
import { printJson, printLine } from "../output.js";

/** How long the first call waits on the server before the command follows the status instead. */
const FIRST_WAIT_MS = 5_000;
const POLL_MS = 500;
/** A progress line at least this often while nothing changes. */
const PROGRESS_EVERY_MS = 5_000;
const DEFAULT_WAIT_MS = 120_000;

interface WaitOptions {
  wait: boolean;
  waitFor: number;
}

export function registerPlacementCommands(group: Command, ctx: CliContext): void {
  group
    .command("drain")
    .description("drain a node: it keeps running and serving forwarded calls, but every partition it holds moves to the other members, and it gets none until undrained (the mark is kept in etcd, across restarts)")
    .argument("<node>", "the node id")
    .option("--undo", "undrain the node: the ring places partitions on it again")
    .option("--no-wait", "answer once the drain is recorded, without waiting for the partitions to move")
    .option("--wait-for <duration>", "how long to wait for the partitions to move, e.g. 30s, 5m", durationArg, DEFAULT_WAIT_MS)
    .action(async (node: string, opts: WaitOptions & { undo?: boolean }, cmd: Command) => {
      const s = ctx.session(cmd);
      const admin = s.client(AdminService);
      const started = Date.now();
      const firstWaitMs = opts.wait && !opts.undo ? Math.min(opts.waitFor, FIRST_WAIT_MS) : 0;
      let res = await admin.drainNode({ nodeId: node, undo: opts.undo ?? false, waitMs: firstWaitMs }, { timeoutMs: s.timeoutMs + firstWaitMs });
      if (!res.finished && opts.wait && !opts.undo) {
        const left = await follow(s, started, opts.waitFor, (status) => heldBy(status, node), (n) => `${node}: ${n} partition(s) still to move`);
        res = { ...res, partitionsLeft: left, finished: left === 0, waitedMs: BigInt(Date.now() - started) };
      }
      if (s.json) return printJson(s.io, toApiJson(DrainNodeResponseSchema, res) as JsonObject);
      const took = seconds(Date.now() - started);
      if (opts.undo) printLine(s.io, `undrained ${node}: the ring places partitions on it again (it holds ${res.partitionsLeft} now; the others hand it its share)`);
      else if (res.finished) printLine(s.io, `drained ${node}: it holds no partition (${took}); undo with: conveyor cluster drain ${node} --undo`);
      else if (!opts.wait) printLine(s.io, `draining ${node}: ${res.partitionsLeft} partition(s) to move; follow with: conveyor cluster status`);
      else throw stillMoving(`draining ${node}: ${res.partitionsLeft} partition(s) still to move after ${took}; the drain stays recorded and continues (see conveyor cluster status)`);
    });

  group
    .command("move")
    .description("move a partition to a node by pinning it there (kept in etcd: the placement honours it while that node is active and not drained), or --unpin it")
    .argument("<partition>", "the partition number (see: conveyor cluster status --partitions)", intArg(0, 2 ** 32 - 1))
    .option("--to <node>", "the node to move it to")
    .option("--unpin", "remove the partition's pin: the ring places it again")
    .option("--no-wait", "answer once the pin is recorded, without waiting for the move")
    .option("--wait-for <duration>", "how long to wait for the move, e.g. 30s", durationArg, DEFAULT_WAIT_MS)
    .action(async (partition: number, opts: WaitOptions & { to?: string; unpin?: boolean }, cmd: Command) => {
      const s = ctx.session(cmd);
      const admin = s.client(AdminService);
      const started = Date.now();
      const unpin = opts.unpin ?? false;
      const firstWaitMs = opts.wait && !unpin ? Math.min(opts.waitFor, FIRST_WAIT_MS) : 0;
      let res = await admin.movePartition({ partition, toNodeId: opts.to ?? "", unpin, waitMs: firstWaitMs }, { timeoutMs: s.timeoutMs + firstWaitMs });
      if (!res.finished && opts.wait && !unpin) {
        const to = opts.to ?? "";
        const left = await follow(s, started, opts.waitFor, (status) => (movedTo(status, partition, to) ? 0 : 1), () => `partition ${partition}: moving to ${to}`);
        res = { ...res, heldBy: left === 0 ? to : res.heldBy, finished: left === 0, waitedMs: BigInt(Date.now() - started) };
      }
      if (s.json) return printJson(s.io, toApiJson(MovePartitionResponseSchema, res) as JsonObject);
      const took = seconds(Date.now() - started);
      const from = res.fromNodeId || "nobody (unclaimed)";
      if (unpin) printLine(s.io, `unpinned partition ${partition}: the ring places it again (held by ${res.heldBy || "nobody yet"})`);
      else if (res.finished) printLine(s.io, `moved partition ${partition} from ${from} to ${opts.to} (${took}); pinned there until: conveyor cluster move ${partition} --unpin`);
      else if (!opts.wait) printLine(s.io, `moving partition ${partition} from ${from} to ${opts.to}: pinned; follow with: conveyor cluster status --partitions`);
      else throw stillMoving(`partition ${partition} is still held by ${res.heldBy || "nobody"} after ${took}; the pin stays recorded and the move continues (see conveyor cluster status --partitions)`);
    });
}

/** The wait ran out: the override is recorded and the rebalancers keep moving (exit 4: looking again later may show it done). */
const stillMoving = (message: string) => new ConveyorError("UNAVAILABLE", "RELOCATING", message);

/** Follows GetClusterStatus until `left` is 0 or `waitForMs` since `started` has passed, printing progress (not with --json); returns the last count. */
async function follow(s: Session, started: number, waitForMs: number, left: (status: GetClusterStatusResponse) => number, describe: (n: number) => string): Promise<number> {
  const admin = s.client(AdminService);
  let last = -1;
  let printedAt = 0;
  for (;;) {
    const status = await admin.getClusterStatus({ withLeases: false }, s.call);
    const n = left(status);
    if (n === 0) return 0;
    const now = Date.now();
    if (!s.json && (n !== last || now - printedAt >= PROGRESS_EVERY_MS)) {
      printLine(s.io, `${describe(n)} (${seconds(now - started)})`);
      printedAt = now;
    }
    last = n;
    if (now - started >= waitForMs) return n;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** Partitions recorded as held by `node`. */
const heldBy = (status: GetClusterStatusResponse, node: string) => status.partitionStates.filter((p) => p.state === "owned" && p.owner === node).length;

/** Partition `p` is held by `node`, or by nobody yet (its first call claims it at its pin). */
function movedTo(status: GetClusterStatusResponse, p: number, node: string): boolean {
  const state = status.partitionStates[p];
  return state !== undefined && (state.state === "unclaimed" || (state.state === "owned" && state.owner === node));
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
