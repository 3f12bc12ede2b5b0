/**
 * What a node does as a cluster member once it has joined: claim back the partitions it
 * has rows of and bring their queues back, bring back the queues of every partition it
 * claims later (a handoff to it, or a first call), move partitions to where the ring
 * and the operator's drains and pins want them (handoff/rebalancer.ts), and on stop
 * drain: mark itself draining, hand every partition off, then leave. A node an operator
 * drained (`conveyor cluster drain`) keeps running and serving forwarded calls, but the
 * placement gives it nothing, so its rebalancer hands everything off the same way.
 * A single node does none of this.
 */
import type { Logger } from "pino";
import type { Clock } from "../base/clock.js";
import { fenced, type ConveyorError } from "../base/errors.js";
import type { ClusterMember } from "../cluster/cluster-member.js";
import type { PartitionOwners } from "../cluster/partition-owners.js";
import type { PartitionRows } from "../storage/partition-rows.js";
import type { Peers } from "./forwarding/peers.js";
import { Rebalancer } from "./handoff/rebalancer.js";
import type { HandoffResult } from "./handoff/partition-handoff.js";

export interface ClusterNodeDeps {
  member: ClusterMember;
  owners: PartitionOwners;
  rows: PartitionRows;
  peers: Peers;
  clock: Clock;
  logger: Logger;
  /** Queues whose grains must be in memory when their partition is held (unfinished tasks, unpaused schedules). */
  queuesToActivate: () => Iterable<string>;
  activate: (queues: string[]) => Promise<unknown>;
  releaseParked: (moving: (queue: string) => boolean) => void;
  /** Ends every parked Lease call with this (retryable) error. */
  refuseParked: (error: ConveyorError) => void;
  retireGrain: (queue: string) => void;
  committed: (p: number) => Promise<void>;
  /** The sequence of p's last changelog entry (0 without a changelog), sent with a handoff's rows. */
  logSeq: (p: number) => number;
  onHandedOff?: (result: HandoffResult) => void;
  onHandoffFailed?: (cause: string) => void;
  onClaimed?: (p: number) => void;
  /** Called after this node took over a partition whose holder was gone (`from`), from the changelog. */
  onTakeover?: (p: number, from: string) => void;
  /** How long a stop may spend handing partitions off before it leaves anyway. */
  drainTimeoutMs: number;
}

/**
 * How soon a recorded partition whose claim failed is tried again: soon, since a claim
 * that fails while etcd is away or the node not yet registered again is what keeps the
 * partition's queues unserved once both are back (a failed claim costs one etcd call).
 */
const CLAIM_RETRY_MS = 250;

export async function runClusterMember(deps: ClusterNodeDeps): Promise<{ drain: () => Promise<void> }> {
  const { owners, member, logger } = deps;
  const activatePartition = (p: number) => {
    const queues = [...deps.queuesToActivate()].filter((q) => owners.partitionOf(q) === p);
    if (queues.length > 0) deps.activate(queues).catch((err: unknown) => logger.warn({ err, partition: p }, "could not bring a claimed partition's queues back"));
  };
  // Claim back what this node has rows of (before listening to claims: start-up activates them itself).
  const local = new Set(deps.rows.queueNames().map((q) => owners.partitionOf(q)));
  // A fenced node holds nothing: its parked Lease calls are answered UNAVAILABLE/FENCED at
  // once (the worker asks again, and is served after this node registers again or by
  // whichever node holds the queue then) rather than waiting out their long poll on
  // queues this node may no longer serve.
  member.onFenced(() => deps.refuseParked(fenced(member.nodeId)));
  const held = new Set(await owners.claimAtStart(local));
  await deps.activate([...deps.queuesToActivate()].filter((q) => held.has(owners.partitionOf(q))));
  owners.onClaimed(activatePartition);

  // After a fence the node registers again as a new incarnation, and its old claims no
  // longer count. It claims back (at new epochs) the partitions recorded under its old
  // registration, as at start, rather than on the first call to each: their grains'
  // timers (lapsing leases, delayed tasks, schedules) need the partition held to run.
  // Found by the SIGSTOP test: a woken node left its partitions at their old epochs.
  // With a changelog, the same goes for a dead holder's partitions that the placement now
  // gives this node (a takeover, placement.ts rule 5): claimed as soon as the holder's
  // registration is gone, not on the first call, so its timers and leases run again.
  let retry: (() => void) | undefined;
  const claimRecorded = () => {
    for (const [p] of owners.entries()) {
      if (owners.route(p).kind !== "claim") continue;
      // Single-flight per partition; one that fails (not serving yet, the log not reachable) is tried again.
      owners.acquire(p).then(
        () => {},
        (err: unknown) => {
          logger.debug({ err, partition: p }, "could not claim a recorded partition yet; will retry");
          retry ??= deps.clock.setTimer(CLAIM_RETRY_MS, () => {
            retry = undefined;
            claimRecorded();
          });
        });
    }
  };

  let draining = false;
  const rebalancer = new Rebalancer({
    owners, rows: deps.rows, peers: deps.peers, releaseParked: deps.releaseParked, retireGrain: deps.retireGrain,
    committed: deps.committed, logSeq: deps.logSeq, logger, clock: deps.clock, retryMs: 1_000,
    // A stop or an operator's drain empties this node; an operator's pin moves one partition; else the ring changed.
    cause: (p, to) => (draining || owners.drained(owners.nodeId) ? "drain" : owners.overrides.pins.get(p) === to ? "move" : "rebalance"),
    ...(deps.onHandedOff ? { onHandedOff: deps.onHandedOff } : {}),
    ...(deps.onHandoffFailed ? { onHandoffFailed: deps.onHandoffFailed } : {}),
  });
  if (deps.onClaimed) owners.onClaimed(deps.onClaimed);
  // Counted where the claim is won, once per claim: counting here, per pass over the
  // records, counted a claim once for every pass that joined it while it waited for the
  // log (22 for 2 partitions in the network fault test) and not at all when a call's claim
  // won it first.
  owners.onClaimed((p, from) => {
    if (from !== undefined) deps.onTakeover?.(p, from);
  });
  owners.onChange(() => {
    rebalancer.poke();
    claimRecorded();
  });
  member.onChange(() => {
    rebalancer.poke();
    claimRecorded();
  });
  rebalancer.poke();
  claimRecorded();

  return {
    drain: async () => {
      draining = true;
      await member.beginDrain();
      const started = deps.clock.nowMs();
      const done = await rebalancer.settled(deps.drainTimeoutMs);
      rebalancer.stop();
      const left = owners.held();
      if (done && left.length === 0) logger.info({ ms: deps.clock.nowMs() - started }, "drained: every partition handed off");
      else logger.warn({ held: left.length }, "leaving with partitions still held (no active member to take them, or handoff timed out); they wait for this node");
    },
  };
}
