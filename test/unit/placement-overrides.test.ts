/**
 * The desired owner with the operator's overrides (src/cluster/placement.ts): a pin wins
 * while its node is eligible (active, not drained); a drained node owns nothing; if every
 * active member is drained the drains are ignored rather than leave partitions ownerless.
 * Pure: members and overrides are plain values.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseOverride, type MemberEntry, type MemberState, type PlacementOverrides } from "../../src/cluster/coordination.js";
import { PartitionMap } from "../../src/cluster/partitions.js";
import { Placement } from "../../src/cluster/placement.js";

const P = 16;

function members(...list: Array<[string, MemberState]>): Map<string, MemberEntry> {
  return new Map(list.map(([nodeId, state], i) => [nodeId, {
    record: { nodeId, incarnation: `i-${nodeId}`, state, grpc: `127.0.0.1:${1000 + i}`, http: "", version: "t", dataDirId: nodeId, startedAtMs: 0 },
    createRevision: 10 + i, modRevision: 10 + i, leaseId: String(i),
  }]));
}

const overrides = (drains: string[], pins: Array<[number, string]> = []): PlacementOverrides => ({ drains: new Set(drains), pins: new Map(pins) });

describe("Placement with overrides", () => {
  const three = members(["n1", "active"], ["n2", "active"], ["n3", "active"]);

  it("without overrides is the ring over the active members", () => {
    const ring = new PartitionMap(["n1", "n2", "n3"], P);
    const placement = new Placement(P);
    for (let p = 0; p < P; p++) expect(placement.desiredOwner(p, three)).toBe(ring.owner(p));
  });

  it("gives a drained node nothing: the ring over the others", () => {
    const placement = new Placement(P);
    const ring = new PartitionMap(["n1", "n3"], P);
    const owners = placement.desiredOwners(three, overrides(["n2"]));
    expect(owners).toEqual(Array.from({ length: P }, (_, p) => ring.owner(p)));
    expect(owners).not.toContain("n2");
    expect(placement.eligible(three, overrides(["n2"]))).toEqual(["n1", "n3"]);
  });

  it("honours a pin to an eligible node, and ignores a pin to a drained, draining, joining or absent node", () => {
    const placement = new Placement(P);
    const ring = new PartitionMap(["n1", "n2", "n3"], P);
    const other = (p: number) => ["n1", "n2", "n3"].find((n) => n !== ring.owner(p))!;
    expect(placement.desiredOwner(5, three, overrides([], [[5, other(5)]]))).toBe(other(5));
    expect(placement.desiredOwner(5, three, overrides([other(5)], [[5, other(5)]]))).not.toBe(other(5));
    const mixed = members(["n1", "active"], ["n2", "draining"], ["n3", "joining"]);
    expect(placement.desiredOwner(5, mixed, overrides([], [[5, "n2"]]))).toBe("n1");
    expect(placement.desiredOwner(5, mixed, overrides([], [[5, "n3"]]))).toBe("n1");
    expect(placement.desiredOwner(5, mixed, overrides([], [[5, "gone"]]))).toBe("n1");
  });

  it("ignores drains when every active member is drained (never leaves the partitions without an owner)", () => {
    const placement = new Placement(P);
    expect(placement.eligible(three, overrides(["n1", "n2", "n3"]))).toEqual(["n1", "n2", "n3"]);
    expect(placement.desiredOwners(members(["n1", "draining"]), overrides([]))).toEqual([]);
  });

  it("routes an unclaimed partition to its pin (the pinned node claims it on the first call)", () => {
    const placement = new Placement(P);
    const self = { nodeId: "n1", memberRevision: 10 };
    expect(placement.route(3, self, three, new Map(), overrides([], [[3, "n1"]]))).toEqual({ kind: "claim", p: 3 });
    expect(placement.route(3, self, three, new Map(), overrides([], [[3, "n2"]]))).toMatchObject({ kind: "remote", nodeId: "n2" });
  });

  it("property: the desired owner is always an eligible member, the pin when it is eligible, and never a drained node unless all are", () => {
    const nodes = ["n1", "n2", "n3", "n4"];
    const states: MemberState[] = ["active", "draining", "joining"];
    fc.assert(fc.property(
      fc.array(fc.constantFrom(...states), { minLength: 4, maxLength: 4 }),
      fc.subarray(nodes), fc.array(fc.tuple(fc.integer({ min: 0, max: P - 1 }), fc.constantFrom(...nodes, "gone"))),
      (stateList, drained, pinList) => {
        const view = members(...nodes.map((n, i) => [n, stateList[i]!] as [string, MemberState]));
        const o = overrides(drained, pinList);
        const placement = new Placement(P);
        const active = nodes.filter((_, i) => stateList[i] === "active");
        const undrained = active.filter((n) => !drained.includes(n));
        for (let p = 0; p < P; p++) {
          const owner = placement.desiredOwner(p, view, o);
          if (active.length === 0) {
            expect(owner).toBeUndefined();
            continue;
          }
          const eligible = undrained.length > 0 ? undrained : active;
          expect(eligible).toContain(owner);
          const pin = o.pins.get(p);
          if (pin !== undefined && eligible.includes(pin)) expect(owner).toBe(pin);
        }
      }), { seed: 13, numRuns: 150 });
  });
});

describe("parseOverride", () => {
  it("reads drains and pins from their keys; ignores what it does not know", () => {
    expect(parseOverride("drains/n2", "{}", 5)).toEqual({ kind: "drain", nodeId: "n2", drained: true, revision: 5 });
    expect(parseOverride("drains/n2", undefined, 6)).toEqual({ kind: "drain", nodeId: "n2", drained: false, revision: 6 });
    expect(parseOverride("pins/12", JSON.stringify({ nodeId: "n1" }), 7)).toEqual({ kind: "pin", p: 12, nodeId: "n1", revision: 7 });
    expect(parseOverride("pins/12", undefined, 8)).toEqual({ kind: "pin", p: 12, nodeId: undefined, revision: 8 });
    expect(parseOverride("pins/x", "{}", 9)).toBeUndefined();
    expect(parseOverride("weights/n1", "{}", 9)).toBeUndefined();
    expect(parseOverride("drains/", "{}", 9)).toBeUndefined();
  });
});
