/**
 * The shared-rule ledger's grants under any schedule: nodes' tasks arrive, dispatch and
 * finish; reports are sent, delivered late, answered, or lost; the ledger moves (a fresh
 * one replaces it and sees only reports sent to it). After every step the tasks running
 * on a slot across all nodes are at most its limit, and once the schedule ends, plain
 * report rounds let every waiting task run (no grant is stuck).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GrantLedger, type SlotGrant, type SlotReport } from "../../src/grains/ledger/grant-ledger.js";
import { NodeGrants } from "../../src/grains/ledger/node-grants.js";

const NODES = ["a", "b", "c"];
const SLOTS = ["@r\u0000x", "@r\u0000y"];
const LIMITS = new Map([[SLOTS[0]!, 3], [SLOTS[1]!, 1]]);

interface SimNode {
  id: string;
  grants: NodeGrants;
  inflight: Map<string, number>;
  waiting: Map<string, number>;
  /** The one report in flight: sent to ledger generation `gen`, then maybe answered. */
  outstanding: { gen: number; slots: SlotReport[]; seq: number; reply?: SlotGrant[] | undefined; delivered: boolean } | undefined;
  seq: number;
}

type Step =
  | { kind: "arrive"; node: number; slot: number }
  | { kind: "dispatch"; node: number; slot: number }
  | { kind: "finish"; node: number; slot: number }
  | { kind: "send"; node: number }
  | { kind: "deliver"; node: number }
  | { kind: "reply"; node: number }
  | { kind: "lose"; node: number }
  | { kind: "move" };

const nodeIx = fc.integer({ min: 0, max: NODES.length - 1 });
const slotIx = fc.integer({ min: 0, max: SLOTS.length - 1 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("arrive" as const), node: nodeIx, slot: slotIx }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("dispatch" as const), node: nodeIx, slot: slotIx }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("finish" as const), node: nodeIx, slot: slotIx }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("send" as const), node: nodeIx }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("deliver" as const), node: nodeIx }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("reply" as const), node: nodeIx }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("lose" as const), node: nodeIx }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("move" as const) }) },
);

class Sim {
  readonly nodes: SimNode[] = NODES.map((id) => ({ id, grants: new NodeGrants(), inflight: new Map(), waiting: new Map(), outstanding: undefined, seq: 0 }));
  ledger = new GrantLedger();
  gen = 0;
  nowMs = 0;

  run(s: Step): void {
    this.nowMs += 1;
    if (s.kind === "move") {
      this.ledger = new GrantLedger();
      this.gen += 1;
      return;
    }
    const n = this.nodes[s.node]!;
    switch (s.kind) {
      case "arrive": {
        const slot = SLOTS[s.slot]!;
        n.grants.declare(slot, LIMITS.get(slot), this.nowMs);
        n.waiting.set(slot, (n.waiting.get(slot) ?? 0) + 1);
        return;
      }
      case "dispatch": {
        const slot = SLOTS[s.slot]!;
        const admit = n.grants.admissionLimitOf(slot) ?? Infinity;
        if ((n.waiting.get(slot) ?? 0) > 0 && (n.inflight.get(slot) ?? 0) < admit) {
          n.waiting.set(slot, n.waiting.get(slot)! - 1);
          n.inflight.set(slot, (n.inflight.get(slot) ?? 0) + 1);
        }
        return;
      }
      case "finish": {
        const slot = SLOTS[s.slot]!;
        if ((n.inflight.get(slot) ?? 0) > 0) n.inflight.set(slot, n.inflight.get(slot)! - 1);
        return;
      }
      case "send": {
        if (n.outstanding) return;
        n.seq += 1;
        const slots = n.grants.report(SLOTS, (slot) => n.inflight.get(slot) ?? 0, (slot) => (n.waiting.get(slot) ?? 0) > 0);
        n.outstanding = { gen: this.gen, slots, seq: n.seq, delivered: false };
        return;
      }
      case "deliver": {
        const o = n.outstanding;
        if (!o || o.delivered) return;
        o.delivered = true;
        // A report for a ledger that moved away is refused (its sender hears an error).
        if (o.gen === this.gen) o.reply = this.ledger.report({ node: n.id, seq: o.seq, slots: o.slots }, NODES);
        return;
      }
      case "reply": {
        const o = n.outstanding;
        if (!o || !o.delivered) return;
        n.outstanding = undefined;
        if (o.reply) n.grants.apply(o.reply);
        return;
      }
      case "lose": {
        // The call failed (timeout, refused): the node applies nothing; a delivered report
        // may still have been taken.
        n.outstanding = undefined;
        return;
      }
    }
  }

  checkInvariant(): void {
    for (const slot of SLOTS) {
      const total = this.nodes.reduce((sum, n) => sum + (n.inflight.get(slot) ?? 0), 0);
      expect(total, `tasks running on ${slot} across nodes`).toBeLessThanOrEqual(LIMITS.get(slot)!);
    }
  }

  /** Rounds of reports, dispatches and finishes until nothing waits (bounded). */
  settle(): number {
    for (let round = 0; round < 50; round++) {
      if (this.nodes.every((n) => [...n.waiting.values()].every((w) => w === 0))) return round;
      for (let i = 0; i < this.nodes.length; i++) {
        this.run({ kind: "reply", node: i });
        this.run({ kind: "send", node: i });
        this.run({ kind: "deliver", node: i });
        this.run({ kind: "reply", node: i });
        for (let s = 0; s < SLOTS.length; s++) {
          this.run({ kind: "dispatch", node: i, slot: s });
          this.checkInvariant();
        }
      }
      for (let i = 0; i < this.nodes.length; i++) for (let s = 0; s < SLOTS.length; s++) this.run({ kind: "finish", node: i, slot: s });
    }
    return -1;
  }
}

describe("shared-rule grants (property)", () => {
  it("never lets the tasks running on a slot across nodes exceed its limit, and strands no waiting task", () => {
    fc.assert(fc.property(fc.array(step, { minLength: 100, maxLength: 400, size: "max" }), (steps) => {
      const sim = new Sim();
      for (const s of steps) {
        sim.run(s);
        sim.checkInvariant();
      }
      expect(sim.settle(), "rounds until every waiting task ran").toBeGreaterThanOrEqual(0);
    }), { seed: 1313, numRuns: 200 });
  });
});
