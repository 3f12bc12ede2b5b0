/**
 * The operator's drains and moves (`conveyor cluster drain` / `move`): validate against
 * this node's view of the cluster, write the override to etcd, and (optionally) wait
 * until the partitions have gone where the override says. The moving itself is done by
 * every holder's rebalancer (server/handoff/rebalancer.ts), which watches the overrides;
 * whichever node receives the call only writes the decision.
 *
 * Why a pin and a drain mark in etcd rather than a one-off handoff: every rebalancer
 * moves each partition it holds to its desired owner, so a move the placement did not
 * know about would be undone at once. Kept in etcd (with no lease), the decision is seen
 * by every node and outlives restarts until an operator undoes it.
 *
 * Validation reads this node's watched view, so two operators racing (each draining one
 * of the last two members) can both pass; the placement then ignores drains rather than
 * leave the partitions without an owner (placement.ts), and undoing one drain fixes it.
 */
import type { Clock } from "../base/clock.js";
import { invalidField, nodeNotFound, placementRefused } from "../base/errors.js";
import type { Coordination, MemberEntry } from "./coordination.js";
import type { PartitionOwners } from "./partition-owners.js";

/** The longest an RPC may wait for a drain or a move to finish. */
export const PLACEMENT_WAIT_MS_MAX = 600_000;

export interface DrainOutcome {
  nodeId: string;
  drained: boolean;
  partitionsLeft: number;
  finished: boolean;
  waitedMs: number;
}

export interface MoveOutcome {
  partition: number;
  fromNodeId: string;
  heldBy: string;
  pinnedTo: string;
  finished: boolean;
  waitedMs: number;
}

export interface PlacementControlDeps {
  coordination: Coordination;
  owners: PartitionOwners;
  members: () => ReadonlyMap<string, MemberEntry>;
  clock: Clock;
}

export class PlacementControl {
  constructor(private readonly deps: PlacementControlDeps) {}

  async drain(nodeId: string, undo: boolean, waitMs: number): Promise<DrainOutcome> {
    checkWait(waitMs);
    const { owners, coordination, clock } = this.deps;
    const members = this.deps.members();
    if (nodeId === "") throw invalidField("node_id", "is required: the node to drain");
    if (undo) {
      // An undo is allowed for a drained node that is down too (it then comes back undrained).
      if (!members.has(nodeId) && !owners.drained(nodeId)) throw nodeNotFound(nodeId);
      await coordination.setDrain(nodeId, false);
      await this.until(() => !owners.drained(nodeId), Math.min(waitMs, 5_000));
      return { nodeId, drained: false, partitionsLeft: owners.heldBy(nodeId).length, finished: true, waitedMs: 0 };
    }
    const member = members.get(nodeId);
    if (!member) throw nodeNotFound(nodeId);
    const others = [...members.values()].filter((m) => m.record.nodeId !== nodeId && m.record.state === "active" && !owners.drained(m.record.nodeId));
    if (others.length === 0) {
      throw placementRefused(`node ${nodeId} is the last active member that is not drained: no other node could take its partitions`);
    }
    await coordination.setDrain(nodeId, true);
    const started = clock.nowMs();
    const done = () => owners.drained(nodeId) && owners.heldBy(nodeId).length === 0;
    const finished = await this.until(done, waitMs);
    return { nodeId, drained: true, partitionsLeft: owners.heldBy(nodeId).length, finished, waitedMs: clock.nowMs() - started };
  }

  async move(p: number, toNodeId: string, unpin: boolean, waitMs: number): Promise<MoveOutcome> {
    checkWait(waitMs);
    const { owners, coordination, clock } = this.deps;
    if (!Number.isInteger(p) || p < 0 || p >= owners.partitions) {
      throw invalidField("partition", `must be a partition of this cluster, 0 to ${owners.partitions - 1}, got ${p}`);
    }
    const members = this.deps.members();
    const from = owners.record(p);
    const fromNodeId = from?.record.state === "owned" ? from.record.owner : "";
    if (unpin) {
      if (toNodeId !== "") throw invalidField("to_node_id", "must be empty with unpin: an unpin moves the partition back to where the ring places it");
      await coordination.setPin(p, undefined);
      await this.until(() => !owners.overrides.pins.has(p), Math.min(waitMs, 5_000));
      return { partition: p, fromNodeId, heldBy: this.holder(p), pinnedTo: "", finished: true, waitedMs: 0 };
    }
    if (toNodeId === "") throw invalidField("to_node_id", "is required: the node to move the partition to (or unpin)");
    const target = members.get(toNodeId);
    if (!target) throw nodeNotFound(toNodeId);
    if (target.record.state !== "active") throw placementRefused(`node ${toNodeId} is ${target.record.state}, not active: it cannot take partition ${p}`);
    if (owners.drained(toNodeId)) throw placementRefused(`node ${toNodeId} is drained: undrain it (conveyor cluster drain ${toNodeId} --undo) before moving partitions to it`);
    if (fromNodeId !== "" && !members.has(fromNodeId)) {
      throw placementRefused(`partition ${p} is held by node ${fromNodeId}, which is down: its rows are only on that node's disk, so it cannot move until that node returns`);
    }
    await coordination.setPin(p, toNodeId);
    const started = clock.nowMs();
    const done = () => owners.overrides.pins.get(p) === toNodeId && [toNodeId, ""].includes(this.holder(p)) && !this.releasedToOther(p, toNodeId);
    const finished = await this.until(done, waitMs);
    return { partition: p, fromNodeId, heldBy: this.holder(p), pinnedTo: owners.overrides.pins.get(p) ?? "", finished, waitedMs: clock.nowMs() - started };
  }

  /** Who holds `p` as recorded ("" when nobody has claimed it); a partition released to a receiver counts as the receiver's. */
  private holder(p: number): string {
    const entry = this.deps.owners.record(p);
    if (!entry) return "";
    return entry.record.state === "owned" ? entry.record.owner : entry.record.to ?? "";
  }

  private releasedToOther(p: number, nodeId: string): boolean {
    const entry = this.deps.owners.record(p);
    return entry !== undefined && entry.record.state === "released" && entry.record.to !== nodeId;
  }

  /** Resolves true once `done()` holds (checked on every change this node sees), false after `waitMs`. */
  private until(done: () => boolean, waitMs: number): Promise<boolean> {
    if (done()) return Promise.resolve(true);
    if (waitMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      let cancelTimer = () => {};
      const stopListening = this.deps.owners.onChange(() => {
        if (!done()) return;
        cancelTimer();
        stopListening();
        resolve(true);
      });
      cancelTimer = this.deps.clock.setTimer(waitMs, () => {
        stopListening();
        resolve(done());
      });
    });
  }
}

function checkWait(waitMs: number): void {
  if (waitMs > PLACEMENT_WAIT_MS_MAX) throw invalidField("wait_ms", `must be at most ${PLACEMENT_WAIT_MS_MAX} (10 minutes), got ${waitMs}`);
}
