/**
 * Partitions: the unit a cluster places, claims and (later) moves. A queue belongs to
 * exactly one of a fixed number P of partitions, and each partition has one owner among
 * the active members.
 *
 * Why partitions rather than queues: a cluster then has P ownership records, P fencing
 * epochs and (later) P changelog subjects, however many queues there are; a relocation
 * moves a batch of queues at once (Temporal's shards, GoAkt's registry partitions).
 *
 * Two mappings, both pure and the same on every node:
 *
 * 1. `partitionOf(queue, P)` = FNV-1a (32-bit, over the queue name's UTF-8 bytes) mod P.
 *    This function is part of the data format: it decides which partition's rows hold a
 *    queue, so it must never change across versions (a change would strand every queue
 *    in a partition it no longer maps to). FNV-1a was chosen because it is tiny, fully
 *    specified (offset basis 0x811c9dc5, prime 0x01000193) and has public test vectors;
 *    the unit tests pin those vectors and a table of queue names, so any change fails.
 *    P itself is fixed at cluster creation (`cluster_partitions`, stored in etcd).
 *
 * 2. `owner(p)` = the `hashring` package's consistent-hash ring over the active members
 *    (sorted, so every node builds the same ring), looked up at the point of the key
 *    `"p<p>"`. Each member has RING_VNODES virtual nodes (x4 points, ketama): 160 rather
 *    than hashring's default 40 spreads each member's share of the ring more evenly
 *    (measured: with P=1024 and 2-8 members the fullest member owns at most 1.31x its
 *    fair share, 1.40x with 40). With the default P=64 the spread is dominated by having
 *    only 64 keys (3 members: the fullest owns up to ~1.5x its share); raising P evens it.
 *    `successor(p)` is the next distinct member clockwise from p's point: the member
 *    that owns p once its owner leaves, so the one that takes over (and, in part 2,
 *    keeps the warm standby). Consistent hashing moves only the partitions of a member
 *    that leaves, and only partitions to a member that joins.
 *
 * This module is the only code that imports hashring.
 */
import HashRing from "hashring";

/** The default `cluster_partitions`. */
export const PARTITIONS_DEFAULT = 64;
/** The most partitions a cluster may have (bounds etcd keys, rows and per-partition metrics). */
export const PARTITIONS_MAX = 4096;
/**
 * Virtual nodes per member on the ring (hashring makes 4 points of each). It must not be
 * hashring's default (40): see the constructor of PartitionMap.
 */
export const RING_VNODES: number = 160;

const FNV_OFFSET_BASIS = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const utf8 = new TextEncoder();

/** FNV-1a, 32-bit, over the UTF-8 bytes of `text`. Never change it: see the header. */
export function fnv1a32(text: string): number {
  let hash = FNV_OFFSET_BASIS;
  // ASCII (every usual queue name) is its own UTF-8: hashed without encoding, which cost
  // 0.4-0.8 µs a call, and a call is made several times a task (routing, ids, settles).
  let i = 0;
  for (; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x80) break;
    hash ^= code;
    hash = Math.imul(hash, FNV_PRIME);
  }
  if (i === text.length) return hash >>> 0;
  for (const byte of utf8.encode(text.slice(i))) {
    hash ^= byte;
    hash = Math.imul(hash, FNV_PRIME);
  }
  return hash >>> 0;
}

/** The partition of `queue` in a cluster of `partitions` partitions. */
export function partitionOf(queue: string, partitions: number): number {
  checkPartitionCount(partitions);
  return fnv1a32(queue) % partitions;
}

/** Throws unless `partitions` is a whole number in [1, PARTITIONS_MAX]. */
export function checkPartitionCount(partitions: number): void {
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > PARTITIONS_MAX) {
    throw new Error(`the partition count must be a whole number from 1 to ${PARTITIONS_MAX}, got ${partitions}`);
  }
}

/** Successors kept per partition: enough for `cluster_standbys` (at most 2) and a pin elsewhere. */
export const SUCCESSORS_KEPT = 3;

/** The ring key of partition `p` (fixed: changing it would move every partition). */
const partitionKey = (p: number) => `p${p}`;

/**
 * Who owns each partition, for one set of members. Immutable: a membership change makes
 * a new map. Lookups are computed once per partition at construction.
 */
export class PartitionMap {
  readonly members: readonly string[];
  private readonly owners: string[];
  /** Per partition, the distinct members after its owner in ring order (up to SUCCESSORS_KEPT). */
  private readonly successorLists: Array<readonly string[]>;

  constructor(members: readonly string[], readonly partitions: number) {
    checkPartitionCount(partitions);
    if (members.length === 0) throw new Error("a partition map needs at least one member");
    this.members = [...new Set(members)].sort();
    // Each member's vnodes are given explicitly: hashring computes the default count as
    // floor(weight share x vnodes x members), which floating point makes 159 (not 160)
    // for 7 members, so every member's points would change when the 7th joins. A
    // per-server count that differs from the option's default (40) is used as is.
    const servers = Object.fromEntries(this.members.map((m) => [m, { vnodes: RING_VNODES }]));
    const ring = new HashRing(servers, "md5");
    this.owners = [];
    this.successorLists = [];
    for (let p = 0; p < partitions; p++) {
      const [owner, ...after] = ring.range(partitionKey(p), 1 + SUCCESSORS_KEPT, true);
      this.owners.push(owner!);
      this.successorLists.push(after);
    }
  }

  /** The member that owns partition `p`. */
  owner(p: number): string {
    return this.owners[this.checkPartition(p)]!;
  }

  /** The member that would own `p` if its owner left; undefined in a ring of one. */
  successor(p: number): string | undefined {
    return this.successorLists[this.checkPartition(p)]![0];
  }

  /** The distinct members after p's owner in ring order, at most SUCCESSORS_KEPT: who would own p as members leave, one after another. */
  successors(p: number): readonly string[] {
    return this.successorLists[this.checkPartition(p)]!;
  }

  /** The owner of every partition, indexed by partition. */
  ownerList(): readonly string[] {
    return this.owners;
  }

  /** The partitions `member` owns, ascending. */
  partitionsOf(member: string): number[] {
    const out: number[] = [];
    this.owners.forEach((owner, p) => owner === member && out.push(p));
    return out;
  }

  private checkPartition(p: number): number {
    if (!Number.isInteger(p) || p < 0 || p >= this.partitions) throw new RangeError(`no partition ${p} (there are ${this.partitions})`);
    return p;
  }
}
