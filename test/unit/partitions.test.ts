/**
 * The partition function and the placement are part of the data format and of the
 * protocol between nodes of different versions: these pinned values must never change
 * (see src/cluster/partitions.ts). A failure here means a release would strand queues
 * in the wrong partition, or make two versions disagree about owners.
 */
import { describe, expect, it } from "vitest";
import { fnv1a32, PARTITIONS_MAX, PartitionMap, partitionOf } from "../../src/cluster/partitions.js";
import { Ring } from "../support/ring.js";

describe("partitionOf", () => {
  it("is FNV-1a 32-bit (the published test vectors)", () => {
    expect(fnv1a32("")).toBe(0x811c9dc5);
    expect(fnv1a32("a")).toBe(0xe40c292c);
    expect(fnv1a32("foobar")).toBe(0xbf9cf968);
  });

  it("maps these queue names to these partitions, forever", () => {
    const pinned: Array<[string, number, number]> = [
      ["default", 30, 3038], ["emails", 28, 1116], ["billing.invoices", 10, 3146],
      ["queue-0", 45, 685], ["ünïcode", 43, 43], ["日本語", 39, 3303],
    ];
    for (const [queue, p64, p4096] of pinned) {
      expect([queue, partitionOf(queue, 64), partitionOf(queue, 4096)]).toEqual([queue, p64, p4096]);
    }
  });

  it("refuses a partition count outside 1..PARTITIONS_MAX", () => {
    for (const bad of [0, -1, 1.5, PARTITIONS_MAX + 1, Number.NaN]) expect(() => partitionOf("q", bad)).toThrow(/partition count/);
    expect(partitionOf("anything", 1)).toBe(0);
  });
});

describe("PartitionMap", () => {
  it("places the 64 partitions of three members this way, forever", () => {
    const map = new PartitionMap(["node-c", "node-a", "node-b"], 64);
    expect(map.ownerList().map((o) => o.slice(-1)).join("")).toBe("baccbacbabccbccaabbababbbbacbabbcabaaaccbcccbbaaabbacacccccbaabc");
    expect([0, 1, 2, 3].map((p) => map.successor(p))).toEqual(["node-a", "node-c", "node-a", "node-a"]);
  });

  it("a ring of one owns everything and has no successor", () => {
    const map = new PartitionMap(["solo"], 64);
    expect(new Set(map.ownerList())).toEqual(new Set(["solo"]));
    expect(map.partitionsOf("solo")).toHaveLength(64);
    expect(map.successor(5)).toBeUndefined();
  });

  it("refuses an empty member list and partitions out of range", () => {
    expect(() => new PartitionMap([], 64)).toThrow(/at least one member/);
    const map = new PartitionMap(["a", "b"], 8);
    expect(() => map.owner(8)).toThrow(RangeError);
    expect(() => map.owner(-1)).toThrow(RangeError);
  });
});

describe("Ring", () => {
  it("routes a queue through its partition", () => {
    const ring = new Ring(["node-a", "node-b", "node-c"], 9, 64);
    expect(ring.partitionOf("emails")).toBe(28);
    expect(ring.ownerOf("emails")).toBe(ring.ownerOfPartition(28));
    expect(ring.owners()).toHaveLength(64);
    expect(ring.version).toBe(9);
  });
});
