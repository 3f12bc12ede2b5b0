/**
 * Properties of the partition placement for any set of members: stable (the same
 * members in any order give the same owners), balanced within a bound, and minimal
 * movement (a join moves partitions only to the new member, a leave only from the
 * leaving one), with the successor being exactly who takes over.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PartitionMap, SUCCESSORS_KEPT, fnv1a32, partitionOf } from "../../src/cluster/partitions.js";

const memberName = fc.stringMatching(/^[a-z][a-z0-9-]{0,11}$/);
const members = (min: number, max: number) => fc.uniqueArray(memberName, { minLength: min, maxLength: max });

/** FNV-1a over the UTF-8 bytes, byte by byte: the definition fnv1a32's ASCII fast path must keep. */
function fnv1a32Bytes(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193);
  return hash >>> 0;
}

describe("fnv1a32 (property)", () => {
  it("equals FNV-1a over the UTF-8 bytes for any string: ASCII, non-ASCII after an ASCII prefix, lone surrogates", () => {
    const text = fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" }),
      fc.tuple(fc.string(), fc.string({ unit: "binary" })).map(([a, b]) => a + b));
    fc.assert(fc.property(text, (t) => {
      expect(fnv1a32(t)).toBe(fnv1a32Bytes(t));
    }), { seed: 29, numRuns: 2000 });
  });
});

describe("partition placement (property)", () => {
  it("is stable: any order of the same members gives the same owners and successors", () => {
    fc.assert(fc.property(members(1, 8).chain((m) => fc.tuple(fc.constant(m), fc.shuffledSubarray(m, { minLength: m.length }))), ([a, b]) => {
      const x = new PartitionMap(a, 64);
      const y = new PartitionMap(b, 64);
      expect(y.ownerList()).toEqual(x.ownerList());
      for (let p = 0; p < 64; p++) expect(y.successor(p)).toBe(x.successor(p));
    }), { seed: 13, numRuns: 100 });
  });

  it("successors are the owners after members leave, one after another: the first standby is who takes over", () => {
    fc.assert(fc.property(members(2, 6), (m) => {
      // One map per member set (building one is the costly part).
      const maps = new Map<string, PartitionMap>();
      const mapOf = (set: string[]) => {
        const key = [...set].sort().join(",");
        if (!maps.has(key)) maps.set(key, new PartitionMap(set, 32));
        return maps.get(key)!;
      };
      const map = mapOf(m);
      for (let p = 0; p < 32; p++) {
        const successors = map.successors(p);
        expect(successors.length).toBe(Math.min(SUCCESSORS_KEPT, m.length - 1));
        expect(new Set([map.owner(p), ...successors]).size).toBe(successors.length + 1);
        expect(map.successor(p)).toBe(successors[0]);
        // Remove the owner, then the next: each time the next successor owns p.
        let left = [...m];
        for (const next of successors) {
          left = left.filter((n) => n !== mapOf(left).owner(p));
          expect(mapOf(left).owner(p)).toBe(next);
        }
      }
    }), { seed: 17, numRuns: 25 });
  });

  it("partitionOf is in range and a pure function of the name", () => {
    fc.assert(fc.property(fc.string({ unit: "grapheme", maxLength: 40 }), fc.integer({ min: 1, max: 4096 }), (queue, parts) => {
      const p = partitionOf(queue, parts);
      expect(p).toBeGreaterThanOrEqual(0);
      expect(p).toBeLessThan(parts);
      expect(partitionOf(`${queue}`, parts)).toBe(p);
    }), { seed: 5, numRuns: 500 });
  });

  it("is balanced: with 1024 partitions no member of 2-8 owns outside [0.5, 1.6]x its fair share", () => {
    fc.assert(fc.property(members(2, 8), (m) => {
      const map = new PartitionMap(m, 1024);
      const fair = 1024 / m.length;
      for (const member of m) {
        const owned = map.partitionsOf(member).length;
        expect(owned, `${member} of ${m.length}`).toBeGreaterThanOrEqual(0.5 * fair);
        expect(owned, `${member} of ${m.length}`).toBeLessThanOrEqual(1.6 * fair);
      }
    }), { seed: 21, numRuns: 60 });
  });

  it("with the default 64 partitions and 3 members, every member owns something and none more than twice its share", () => {
    fc.assert(fc.property(members(3, 3), (m) => {
      const map = new PartitionMap(m, 64);
      for (const member of m) {
        const owned = map.partitionsOf(member).length;
        expect(owned).toBeGreaterThan(0);
        expect(owned).toBeLessThanOrEqual((2 * 64) / 3);
      }
    }), { seed: 34, numRuns: 200 });
  });

  it("a join moves partitions only to the new member; a leave only from the leaver, each to its successor", () => {
    const coverage = { joinsThatMoved: 0, moved: 0 };
    fc.assert(fc.property(members(2, 8), (all) => {
      const [joiner, ...rest] = all as [string, ...string[]];
      const before = new PartitionMap(rest, 64);
      const after = new PartitionMap(all, 64);
      const without = new Map<string, PartitionMap>();
      const leaving = (member: string) => {
        if (!without.has(member)) without.set(member, new PartitionMap(all.filter((x) => x !== member), 64));
        return without.get(member)!;
      };
      let moved = 0;
      for (let p = 0; p < 64; p++) {
        if (after.owner(p) !== before.owner(p)) {
          moved++;
          expect(after.owner(p), `partition ${p} moved to a member that did not join`).toBe(joiner);
          // The reverse: the joiner leaves again, and p goes to the successor it had.
          expect(after.successor(p)).toBe(before.owner(p));
        }
        if (after.owner(p) !== joiner) expect(after.owner(p)).toBe(before.owner(p));
        // A leave of p's owner hands p to p's successor.
        expect(leaving(after.owner(p)).owner(p), `successor of ${p}`).toBe(after.successor(p));
      }
      if (moved > 0) coverage.joinsThatMoved++;
      coverage.moved += moved;
    }), { seed: 55, numRuns: 80 });
    // Anti-vacuity: joins did move partitions, about P/(n+1) each on average.
    expect(coverage.joinsThatMoved).toBeGreaterThan(60);
    expect(coverage.moved / 80).toBeGreaterThan(5);
  });
});
