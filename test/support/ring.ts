/**
 * The ring's *desired* placement, for tests: queue → partition (`partitionOf`) → the
 * member the consistent-hash ring over `members` gives it (`PartitionMap`), exactly as a
 * node computes it (cluster/placement.ts). Tests use it to pick queues that land on a given
 * node and to check which node a partition should move to. Nodes themselves route by the
 * partitions' recorded owners, not by this.
 */
import { PARTITIONS_DEFAULT, PartitionMap, partitionOf } from "../../src/cluster/partitions.js";

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
