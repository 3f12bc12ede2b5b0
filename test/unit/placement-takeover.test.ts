/**
 * A dead holder's partitions (src/cluster/placement.ts, rules 5 and 6): without a
 * changelog they answer OWNER_DOWN, since their rows are only on the dead node's disk;
 * with one (`takeover`) the desired owner over the live members claims them, and every
 * other node forwards there. A live holder is never taken over, whatever the ring says.
 */
import { describe, expect, it } from "vitest";
import type { MemberEntry, MemberState, PartitionRecord } from "../../src/cluster/coordination.js";
import { PartitionMap } from "../../src/cluster/partitions.js";
import { Placement, type PartitionEntry } from "../../src/cluster/placement.js";

const P = 16;

function members(...list: Array<[string, MemberState]>): Map<string, MemberEntry> {
  return new Map(list.map(([nodeId, state], i) => [nodeId, {
    record: { nodeId, incarnation: `i-${nodeId}`, state, grpc: `127.0.0.1:${1000 + i}`, http: "", version: "t", dataDirId: nodeId, startedAtMs: 0 },
    createRevision: 10 + i, modRevision: 10 + i, leaseId: String(i),
  }]));
}

const owned = (owner: string, memberRevision: number): PartitionEntry => ({
  record: { owner, incarnation: `i-${owner}`, memberRevision, state: "owned" } satisfies PartitionRecord, epoch: 50,
});
const releasedTo = (from: string, to: string): PartitionEntry => ({
  record: { owner: from, incarnation: `i-${from}`, memberRevision: 10, state: "released", to }, epoch: 51,
});

describe("placement of a dead holder's partitions", () => {
  // n3 (create revision 12 when it lived) is gone; n1 and n2 remain.
  const live = members(["n1", "active"], ["n2", "active"]);
  const ring = new PartitionMap(["n1", "n2"], P);
  const self = (nodeId: string) => ({ nodeId, memberRevision: nodeId === "n1" ? 10 : 11 });

  it("without a changelog: OWNER_DOWN, naming the dead holder, on every node", () => {
    const placement = new Placement(P);
    for (let p = 0; p < P; p++) {
      const records = new Map([[p, owned("n3", 12)]]);
      for (const n of ["n1", "n2"]) expect(placement.route(p, self(n), live, records)).toEqual({ kind: "down", p, nodeId: "n3" });
    }
    expect(placement.route(3, self("n1"), live, new Map([[3, releasedTo("n1", "n3")]]))).toEqual({ kind: "down", p: 3, nodeId: "n3" });
  });

  it("with a changelog: the desired owner over the live members claims it; the other forwards there", () => {
    const placement = new Placement(P, true);
    for (let p = 0; p < P; p++) {
      const records = new Map([[p, owned("n3", 12)]]);
      const target = ring.owner(p);
      const other = target === "n1" ? "n2" : "n1";
      expect(placement.route(p, self(target), live, records)).toEqual({ kind: "claim", p });
      expect(placement.route(p, self(other), live, records)).toMatchObject({ kind: "remote", p, nodeId: target, epoch: 0 });
      // A handoff to n3 that n3 never claimed: taken over the same way.
      expect(placement.route(p, self(target), live, new Map([[p, releasedTo(other, "n3")]]))).toEqual({ kind: "claim", p });
    }
  });

  it("with a changelog, a live holder is never taken over, and one that registered again is still forwarded to", () => {
    const placement = new Placement(P, true);
    const three = members(["n1", "active"], ["n2", "active"], ["n3", "active"]);
    for (let p = 0; p < P; p++) {
      expect(placement.route(p, self("n1"), three, new Map([[p, owned("n3", 12)]]))).toMatchObject({ kind: "remote", nodeId: "n3", epoch: 50 });
      // n3 restarted (a new registration): it claims again itself; calls go there.
      expect(placement.route(p, self("n1"), three, new Map([[p, owned("n3", 7)]]))).toMatchObject({ kind: "remote", nodeId: "n3", epoch: 0 });
    }
  });

  it("names as standbys the members after the desired owner on the ring: the first is who would take over", () => {
    const three = members(["n1", "active"], ["n2", "active"], ["n3", "active"]);
    const placement = new Placement(P, true);
    for (let p = 0; p < P; p++) {
      const owner = placement.desiredOwner(p, three)!;
      const [first, second] = placement.standbys(p, 2, three);
      expect([owner, first, second].sort()).toEqual(["n1", "n2", "n3"]);
      expect(placement.standbys(p, 1, three)).toEqual([first]);
      const withoutOwner = new Map([...three].filter(([id]) => id !== owner));
      expect(placement.desiredOwner(p, withoutOwner)).toBe(first);
      expect(placement.standbys(p, 0, three)).toEqual([]);
    }
    // A pinned partition: its standbys are the ring's members other than the pin.
    const pinned = placement.standbys(4, 2, three, { drains: new Set(), pins: new Map([[4, "n2"]]) });
    expect(pinned.sort()).toEqual(["n1", "n3"]);
  });

  it("with a changelog and no live member: nobody claims", () => {
    const placement = new Placement(P, true);
    expect(placement.route(2, self("n1"), members(["n1", "draining"]), new Map([[2, owned("n3", 12)]]))).toEqual({ kind: "none", p: 2 });
  });
});
