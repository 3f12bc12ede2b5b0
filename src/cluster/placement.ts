/**
 * Where a partition is served, decided from two views this node keeps of etcd: the
 * members (membership.ts) and the partition records (`partitions/<p>`, watched). Pure:
 * the shell (partition-owners.ts) feeds it and acts on its answers.
 *
 * Two owners must not be confused:
 * - the *desired* owner: who should hold p. An operator's pin (`conveyor cluster move`)
 *   when the pinned node is an active member that is not drained; else the
 *   consistent-hash ring (partitions.ts) over the *eligible* members: the active ones
 *   not drained (`conveyor cluster drain`). If every active member is drained, the ring
 *   ignores the drains rather than leave every partition without an owner. The desired
 *   owner decides who claims a partition nobody holds, and where each holder's
 *   rebalancer hands its partitions (server/handoff/rebalancer.ts).
 * - the *recorded* owner: whoever claimed p in etcd, at an epoch (the key's mod
 *   revision). Calls always go to the recorded owner while its registration lives, even
 *   when the ring now prefers another node: moving a partition takes a handoff (its rows
 *   go with it), never a claim over a live holder.
 *
 * The rules, in order, for partition p:
 * 1. Recorded owner is this node's current registration → serve here at its epoch.
 * 2. Recorded owner is this node, an older registration (a restart, or re-registering
 *    after fencing) → claim it again (new epoch), then serve: the rows are on this disk.
 * 3. Recorded owner is another node whose registration is the recorded one → forward there.
 * 4. Recorded owner is another node that registered again since → forward there; it
 *    claims again on arrival (rule 2 on its side).
 * 5. Recorded owner's registration is gone → without a changelog, OWNER_DOWN: its rows
 *    are only on its disk, so nobody may claim p empty. With a changelog (cluster part 2,
 *    `takeover`), every acknowledged write of p is on the log, so the desired owner takes
 *    it over as in rule 7: it claims p, rebuilds the rows from the log, fences the log.
 * 6. Released by a handoff to node T → T claims it (it has the rows): serve here if T is
 *    this node, else forward to T (if T is gone: OWNER_DOWN, or a takeover as in rule 5).
 * 7. No record, or released without a receiver → the desired owner claims it: serve here
 *    if that is this node, else forward there.
 * A partition this node is handing off is `moving` (partition-owners.ts): calls for it
 * wait for the move to end, then route again.
 */
import { NO_OVERRIDES, type MemberEntry, type PartitionRecord, type PlacementOverrides } from "./coordination.js";
import { PartitionMap } from "./partitions.js";

export type Route =
  | { kind: "local"; p: number; epoch: number }
  | { kind: "claim"; p: number }
  | { kind: "remote"; p: number; nodeId: string; address: string; epoch: number }
  | { kind: "down"; p: number; nodeId: string }
  | { kind: "none"; p: number }
  | { kind: "moving"; p: number };

/** This node's registration: the create revision of its member key (0 while not registered). */
export interface SelfRegistration {
  nodeId: string;
  memberRevision: number;
}

export interface PartitionEntry {
  record: PartitionRecord;
  /** The key's mod revision: the epoch of the claim while owned. */
  epoch: number;
}

export class Placement {
  private desired: PartitionMap | undefined;
  private desiredKey = "";

  /** `takeover`: the cluster has a changelog, so a dead holder's partitions go to their desired owner (rule 5). */
  constructor(readonly partitions: number, private readonly takeover = false) {}

  /** The route of partition `p` given the members and records as this node sees them. */
  route(
    p: number, self: SelfRegistration, members: ReadonlyMap<string, MemberEntry>, records: ReadonlyMap<number, PartitionEntry>,
    overrides: PlacementOverrides = NO_OVERRIDES,
  ): Route {
    const entry = records.get(p);
    if (entry && entry.record.state === "owned") {
      const { record, epoch } = entry;
      if (record.owner === self.nodeId) {
        return record.memberRevision === self.memberRevision && self.memberRevision > 0 ? { kind: "local", p, epoch } : { kind: "claim", p };
      }
      const owner = members.get(record.owner);
      if (!owner) return this.takeover ? this.toDesired(p, self, members, overrides) : { kind: "down", p, nodeId: record.owner };
      return { kind: "remote", p, nodeId: record.owner, address: owner.record.grpc, epoch: owner.createRevision === record.memberRevision ? epoch : 0 };
    }
    // Released by a handoff: only the node that received the rows may claim it.
    if (entry && entry.record.to) {
      const to = entry.record.to;
      if (to === self.nodeId) return { kind: "claim", p };
      const receiver = members.get(to);
      if (receiver) return { kind: "remote", p, nodeId: to, address: receiver.record.grpc, epoch: 0 };
      return this.takeover ? this.toDesired(p, self, members, overrides) : { kind: "down", p, nodeId: to };
    }
    return this.toDesired(p, self, members, overrides);
  }

  /** Rule 7: the desired owner claims p (here, or forwarded there). */
  private toDesired(p: number, self: SelfRegistration, members: ReadonlyMap<string, MemberEntry>, overrides: PlacementOverrides): Route {
    const target = this.desiredOwner(p, members, overrides);
    if (target === undefined) return { kind: "none", p };
    if (target === self.nodeId) return { kind: "claim", p };
    return { kind: "remote", p, nodeId: target, address: members.get(target)!.record.grpc, epoch: 0 };
  }

  /** Who should hold `p`: its pin if the pinned node is eligible, else the ring over the eligible members; undefined when none is active. */
  desiredOwner(p: number, members: ReadonlyMap<string, MemberEntry>, overrides: PlacementOverrides = NO_OVERRIDES): string | undefined {
    const eligible = this.eligible(members, overrides);
    const pinned = overrides.pins.get(p);
    if (pinned !== undefined && eligible.includes(pinned)) return pinned;
    return this.ring(eligible)?.owner(p);
  }

  /**
   * The members that keep a warm copy of p (cluster part 2): the first `count` members
   * after its desired owner in ring order over the eligible members, so the first of them
   * is the one that takes p over if its owner dies (the ring without the owner names it).
   */
  standbys(p: number, count: number, members: ReadonlyMap<string, MemberEntry>, overrides: PlacementOverrides = NO_OVERRIDES): string[] {
    if (count <= 0) return [];
    const ring = this.ring(this.eligible(members, overrides));
    if (!ring) return [];
    const owner = this.desiredOwner(p, members, overrides);
    return [ring.owner(p), ...ring.successors(p)].filter((n) => n !== owner).slice(0, count);
  }

  /** The desired owner of every partition, indexed by partition (empty when no member is active). */
  desiredOwners(members: ReadonlyMap<string, MemberEntry>, overrides: PlacementOverrides = NO_OVERRIDES): string[] {
    if (this.eligible(members, overrides).length === 0) return [];
    return Array.from({ length: this.partitions }, (_, p) => this.desiredOwner(p, members, overrides)!);
  }

  /** The members partitions may be placed on: active and not drained (all active ones if every one is drained). */
  eligible(members: ReadonlyMap<string, MemberEntry>, overrides: PlacementOverrides = NO_OVERRIDES): string[] {
    const active = [...members.values()].filter((m) => m.record.state === "active").map((m) => m.record.nodeId).sort();
    const undrained = active.filter((n) => !overrides.drains.has(n));
    return undrained.length > 0 ? undrained : active;
  }

  /** The ring over `nodes` (sorted), rebuilt only when that set changes (160 virtual nodes per member). */
  private ring(nodes: string[]): PartitionMap | undefined {
    if (nodes.length === 0) return undefined;
    const key = nodes.join("\n");
    if (key !== this.desiredKey || !this.desired) {
      this.desired = new PartitionMap(nodes, this.partitions);
      this.desiredKey = key;
    }
    return this.desired;
  }
}
