/**
 * The consistent-hash ring that maps a queue name to the node that owns its grain.
 *
 * Design: members are sorted before the ring is built, so every node that sees the
 * same member list computes the same owners (as Orleans' hash placement does). Each
 * membership change makes a new Ring with a higher `version`; callers that forward a
 * call carry the version they routed with, so a node can tell a stale route from a
 * real change (the clustering issue builds on this). A single node is a ring of one,
 * on the same code path.
 *
 * This is the only module that imports hashring.
 */
import HashRing from "hashring";

export class Ring {
  private readonly ring: HashRing;
  readonly members: readonly string[];

  constructor(members: readonly string[], readonly version: number) {
    if (members.length === 0) throw new Error("a ring needs at least one member");
    this.members = [...new Set(members)].sort();
    this.ring = new HashRing([...this.members]);
  }

  /** The node that owns `key` (a queue name). */
  ownerOf(key: string): string {
    return this.ring.get(key);
  }
}
