/**
 * The shared-rule ledgers this node holds: one `GrantLedger` per partition it owns, for
 * the rules whose partition("rule:<name>") that is. A ledger lives as long as the claim
 * it was made under: when the partition's epoch changes (it moved away and back, or this
 * node restarted), a fresh ledger starts and grants nothing new until every member has
 * reported to it (grant-ledger.ts rule 3). Answers `ClusterService.ReportSlots`.
 */
import { invalidField } from "../../base/errors.js";
import type { Ownership } from "../../cluster/ownership.js";
import { GrantLedger, type SlotGrant, type SlotReport } from "../../grains/ledger/grant-ledger.js";
import { ruleOfSlot, isSharedSlot } from "../../grains/queue/key-slots.js";

/** The partition of a shared rule's ledger: rules are placed on the ring by name. */
export const ledgerPartitionOf = (ownership: Pick<Ownership, "partitionOf">, slot: string): number =>
  ownership.partitionOf(`rule:${ruleOfSlot(slot)}`);

export interface SlotsReport {
  fromNode: string;
  seq: number;
  partitions: readonly number[];
  slots: readonly SlotReport[];
}

export class LedgerHost {
  private readonly ledgers = new Map<number, { epoch: number; ledger: GrantLedger }>();

  constructor(private readonly ownership: Ownership) {}

  async report(r: SlotsReport): Promise<{ grants: SlotGrant[]; refusedPartitions: number[] }> {
    if (r.fromNode === "") throw invalidField("from_node", "is required");
    for (const p of r.partitions) if (p >= this.ownership.partitions) throw invalidField("partitions", `names ${p}; this cluster has ${this.ownership.partitions}`);
    for (const s of r.slots) if (!isSharedSlot(s.slot) || !s.slot.includes("\u0000")) throw invalidField("slots.slot", `is ${JSON.stringify(s.slot)}; expected a shared rule ("@name") and a key, joined by a NUL`);
    this.dropUnheld();
    const grants: SlotGrant[] = [];
    const refusedPartitions: number[] = [];
    const members = this.ownership.members();
    for (const p of new Set(r.partitions)) {
      const slots = r.slots.filter((s) => ledgerPartitionOf(this.ownership, s.slot) === p);
      const route = this.ownership.route(p);
      let epoch = route.kind === "local" ? route.epoch : undefined;
      // A partition nobody has claimed is claimed for a ledger only when a slot needs it
      // (an empty report of it has nothing to count: a ledger made later waits for the next).
      if (epoch === undefined && slots.length === 0 && !this.ledgers.has(p)) continue;
      if (epoch === undefined || slots.length > 0) {
        try {
          epoch = await this.ownership.acquire(p);
        } catch {
          epoch = undefined;
        }
      }
      if (epoch === undefined) {
        refusedPartitions.push(p);
        continue;
      }
      let held = this.ledgers.get(p);
      if (!held || held.epoch !== epoch) this.ledgers.set(p, (held = { epoch, ledger: new GrantLedger() }));
      grants.push(...(held.ledger.report({ node: r.fromNode, seq: r.seq, slots }, members) ?? []));
    }
    return { grants, refusedPartitions };
  }

  /** Ledgers of partitions this node no longer holds are dropped (their next owner starts afresh). */
  private dropUnheld(): void {
    for (const p of this.ledgers.keys()) if (!this.ownership.holds(p)) this.ledgers.delete(p);
  }
}
