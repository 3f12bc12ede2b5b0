/**
 * The ring that maps a queue name to the node that owns its grain: queue → partition
 * (`partitionOf`, a stable hash mod P) → owner (a consistent-hash ring over the members,
 * `PartitionMap`). See partitions.ts for both mappings and why they never change.
 *
 * Design: members are sorted before the ring is built, so every node that sees the
 * same member list computes the same owners (as Orleans' hash placement does). Each
 * membership change makes a new Ring with a higher `version`: in a cluster, the etcd
 * revision of the last membership change, so it is the same number on every node
 * (membership.ts); a single node is a ring of one at version 1, on the same code path.
 * Callers that forward a call carry the version they routed with, so a node can tell a
 * stale route from a real change.
 */
import { PARTITIONS_DEFAULT, PartitionMap, partitionOf } from "./partitions.js";

export class Ring {
  private readonly map: PartitionMap;

  constructor(members: readonly string[], readonly version: number, readonly partitions: number = PARTITIONS_DEFAULT) {
    if (members.length === 0) throw new Error("a ring needs at least one member");
    this.map = new PartitionMap(members, partitions);
  }

  /** The members, sorted. */
  get members(): readonly string[] {
    return this.map.members;
  }

  /** The partition of `queue`. */
  partitionOf(queue: string): number {
    return partitionOf(queue, this.partitions);
  }

  /** The node that owns `queue` (the owner of its partition). */
  ownerOf(queue: string): string {
    return this.map.owner(this.partitionOf(queue));
  }

  /** The node that owns partition `p`. */
  ownerOfPartition(p: number): string {
    return this.map.owner(p);
  }

  /** The node that takes partition `p` over when its owner leaves; undefined in a ring of one. */
  successorOf(p: number): string | undefined {
    return this.map.successor(p);
  }

  /** The owner of every partition, indexed by partition. */
  owners(): readonly string[] {
    return this.map.ownerList();
  }
}
