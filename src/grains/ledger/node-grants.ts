/**
 * A node's side of the shared-rule ledger (grant-ledger.ts): the grant it holds per shared
 * slot, the limits it has set, and the reports it sends. Pure: the server's exchange
 * (server/ledger/grant-exchange.ts) moves the reports and replies.
 *
 * The grains ask it synchronously at dispatch (`admissionLimitOf`): a node runs at most
 * its grant on a limited shared slot. The grant changes only by a ledger's reply; a raise
 * is what lets held tasks go, so the caller wakes the queues watching those slots.
 */
import type { SlotGrant, SlotReport } from "./grant-ledger.js";

interface SlotGrantState {
  grant: number;
  /** The limit the ledger answered (it knows every node's newest setting). */
  ledgerLimit: number | undefined;
  answered: boolean;
}

interface DeclaredLimit {
  limit: number | undefined;
  setAtMs: number;
}

export class NodeGrants {
  private readonly grants = new Map<string, SlotGrantState>();
  private readonly declared = new Map<string, DeclaredLimit>();

  /** The slot's limit as this node knows it: the ledger's answer, else its own setting. */
  limitOf(slot: string): number | undefined {
    const g = this.grants.get(slot);
    if (g?.answered) return g.ledgerLimit;
    return this.declared.get(slot)?.limit;
  }

  /** How many tasks of `slot` this node may run now: its grant (undefined: unlimited). */
  admissionLimitOf(slot: string): number | undefined {
    if (this.limitOf(slot) === undefined) return undefined;
    return this.grants.get(slot)?.grant ?? 0;
  }

  /** This node set the slot's limit (a task's rule, newest wins cluster-wide by time). */
  declare(slot: string, limit: number | undefined, nowMs: number): void {
    this.declared.set(slot, { limit, setAtMs: nowMs });
  }

  /**
   * The report of the slots `wanted` selects, as this node stands now. A slot is listed
   * when the node holds grant, runs tasks of it or has tasks waiting on it.
   */
  report(
    slots: Iterable<string>, inflightOf: (slot: string) => number, waitingOn: (slot: string) => boolean,
  ): SlotReport[] {
    const out: SlotReport[] = [];
    for (const slot of slots) {
      const held = this.grants.get(slot)?.grant ?? 0;
      const inflight = inflightOf(slot);
      const waiting = waitingOn(slot);
      if (held === 0 && inflight === 0 && !waiting) continue;
      const limit = this.limitOf(slot);
      // Waiting tasks want the whole limit: the ledger's fair split decides what they get.
      const want = inflight + (waiting ? (limit ?? 0) : 0);
      const declared = this.declared.get(slot);
      out.push({ slot, held, inflight, want, ...(declared ? { limit: declared.limit, limitSetAtMs: declared.setAtMs } : {}) });
    }
    return out;
  }

  /** Slots this node has any state of (the candidates for a report). */
  knownSlots(): Set<string> {
    return new Set([...this.grants.keys(), ...this.declared.keys()]);
  }

  /** Applies a ledger's reply; returns the slots whose grant rose (their held tasks may go). */
  apply(replies: readonly SlotGrant[]): string[] {
    const raised: string[] = [];
    for (const r of replies) {
      const before = this.grants.get(r.slot);
      const wasLimit = before?.answered ? before.ledgerLimit : this.declared.get(r.slot)?.limit;
      if (r.grant > (before?.grant ?? 0) || (wasLimit !== undefined && r.limit === undefined)) raised.push(r.slot);
      if (r.grant === 0 && r.limit === undefined) this.grants.delete(r.slot);
      else this.grants.set(r.slot, { grant: r.grant, ledgerLimit: r.limit, answered: true });
    }
    return raised;
  }

  /** A slot this node no longer has anything of: forget its grant (the ledger already did). */
  forget(slot: string): void {
    if ((this.grants.get(slot)?.grant ?? 0) === 0) this.grants.delete(slot);
  }
}
