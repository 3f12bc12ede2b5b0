/**
 * The ledger of shared (named) concurrency rules in a cluster: how many tasks each node may
 * run at once on each shared slot (its *grant*), so that the sum over nodes never exceeds
 * the slot's limit. Pure arithmetic: no IO, no clock; the server moves reports to it.
 *
 * Why grants: a queue's grain must decide at dispatch, synchronously, whether a task may
 * take a shared slot, so a remote call per dispatch is out. Each node admits up to its
 * grant locally and asks this ledger for more (or is asked to give some back) in batched
 * reports, one per node per interval carrying every slot.
 *
 * Safety (never over-admit) rests on three rules:
 * 1. A node raises its own grant only to a value this ledger replied, and the ledger
 *    counts that value as the node's before it replies (a lost reply only wastes room).
 * 2. A node's report says what it holds now (`held`, its grant when it sent the report,
 *    which it can only have lowered since) and what runs (`inflight`); the ledger counts
 *    max(held, inflight) for it. A grant taken back (lower target, lowered limit) stays
 *    counted until the node's next report says it has dropped.
 * 3. A fresh ledger (after a move, a restart) grants nothing new until every member has
 *    reported: before that it cannot know what is held elsewhere.
 * A report is the sender's whole state for this ledger: slots it does not list, it holds
 * nothing of. Reports of a node are ordered by `seq`; an older one is ignored.
 * 4. A node that is no longer a member stays counted, at what it last held or ran, until
 *    it reports again: it may have crashed, and workers may still run the tasks it
 *    leased (in part 1 its queues wait for it; when it comes back it reports what its
 *    rows say runs). A node leaving gracefully reports once more after handing its
 *    queues off, with nothing held, which drops it. It asks for nothing meanwhile.
 */

export interface SlotReport {
  slot: string;
  /** The grant the node admits up to now. */
  held: number;
  /** Tasks of the slot running on the node. */
  inflight: number;
  /** How many the node would run if it could (its in-flight plus what waits). */
  want: number;
  /** The slot's limit as the node last set it, and when (the newest setting wins). */
  limit?: number | undefined;
  limitSetAtMs?: number | undefined;
}

export interface LedgerReport {
  node: string;
  seq: number;
  slots: readonly SlotReport[];
}

export interface SlotGrant {
  slot: string;
  /** What the node may run from now on (it may be below what it holds: give back). */
  grant: number;
  /** The slot's limit the ledger knows (undefined: no limit, the grant is moot). */
  limit: number | undefined;
}

interface NodeShare {
  /** Counted for the node: what it may have admitted up to. */
  grant: number;
  inflight: number;
  want: number;
}

interface SlotState {
  limit: number | undefined;
  limitSetAtMs: number;
  nodes: Map<string, NodeShare>;
}

export class GrantLedger {
  private readonly slots = new Map<string, SlotState>();
  private readonly lastSeq = new Map<string, number>();
  private readonly slotsOfNode = new Map<string, Set<string>>();

  /** Has every member reported to this ledger? Until then it grants nothing new. */
  isComplete(members: readonly string[]): boolean {
    return members.every((m) => this.lastSeq.has(m));
  }

  /**
   * Takes one node's report and answers its grants, given the current members (a node
   * not among them keeps what is counted for it, see rule 4, but wants nothing more).
   * Returns undefined for a report older than one already taken (the node ignores nothing:
   * it keeps what it holds).
   */
  report(r: LedgerReport, members: readonly string[]): SlotGrant[] | undefined {
    const last = this.lastSeq.get(r.node);
    if (last !== undefined && r.seq <= last) return undefined;
    this.lastSeq.set(r.node, r.seq);
    this.quietNonMembers(members);
    const listed = new Set<string>();
    for (const s of r.slots) {
      listed.add(s.slot);
      const state = this.stateOf(s.slot);
      if (s.limitSetAtMs !== undefined && s.limitSetAtMs >= state.limitSetAtMs) {
        state.limit = s.limit;
        state.limitSetAtMs = s.limitSetAtMs;
      }
      state.nodes.set(r.node, { grant: Math.max(0, s.held), inflight: Math.max(0, s.inflight), want: Math.max(0, s.want) });
    }
    const before = this.slotsOfNode.get(r.node) ?? new Set<string>();
    for (const slot of before) if (!listed.has(slot)) this.drop(slot, r.node);
    this.slotsOfNode.set(r.node, listed);
    const complete = this.isComplete(members);
    return r.slots.map((s) => this.decide(s.slot, r.node, complete));
  }

  /** Σ over nodes of what is counted for them on `slot` (the invariant: ≤ limit, once complete). */
  countedOf(slot: string): number {
    let sum = 0;
    for (const share of this.slots.get(slot)?.nodes.values() ?? []) sum += Math.max(share.grant, share.inflight);
    return sum;
  }

  limitOf(slot: string): number | undefined {
    return this.slots.get(slot)?.limit;
  }

  private decide(slot: string, node: string, complete: boolean): SlotGrant {
    const state = this.slots.get(slot)!;
    const share = state.nodes.get(node)!;
    const limit = state.limit;
    if (limit === undefined) return { slot, grant: share.grant, limit };
    if (!complete) {
      // Nothing new until every member has reported; taking back is always safe.
      return { slot, grant: Math.min(share.grant, limit), limit };
    }
    const shares = fairShares(limit, state.nodes);
    const fair = shares.get(node)!;
    const free = Math.max(0, limit - this.countedOf(slot));
    if (fair > share.grant) {
      share.grant += Math.min(fair - share.grant, free);
      return { slot, grant: share.grant, limit };
    }
    // Above its fair share: give back when the free room does not cover what the others
    // are short of (or the limit fell below what is held); the grant stays counted until
    // the node reports that it dropped.
    let shortfall = 0;
    for (const [other, s] of state.nodes) if (other !== node) shortfall += Math.max(0, shares.get(other)! - s.grant);
    const takeBack = shortfall > free || this.countedOf(slot) > limit;
    return { slot, grant: takeBack ? fair : share.grant, limit };
  }

  private stateOf(slot: string): SlotState {
    let state = this.slots.get(slot);
    if (!state) this.slots.set(slot, (state = { limit: undefined, limitSetAtMs: -Infinity, nodes: new Map() }));
    return state;
  }

  private drop(slot: string, node: string): void {
    const state = this.slots.get(slot);
    if (!state) return;
    state.nodes.delete(node);
    if (state.nodes.size === 0) this.slots.delete(slot);
  }

  /** A node that is not a member wants nothing more; what it held or ran stays counted (rule 4). */
  private quietNonMembers(members: readonly string[]): void {
    const keep = new Set(members);
    for (const [node, slots] of this.slotsOfNode) {
      if (keep.has(node)) continue;
      for (const slot of slots) {
        const share = this.slots.get(slot)?.nodes.get(node);
        if (share) share.want = 0;
      }
    }
  }
}

/**
 * Water-filling: each node gets min(want, level), the level as high as `limit` allows;
 * what is left over when everyone's want is met goes nowhere (nobody asked). Nodes are
 * served smallest want first (ties by id), each taking at most an even split of what is
 * left, so a remainder goes to the later ones and every ledger computes the same shares.
 */
export function fairShares(limit: number, nodes: ReadonlyMap<string, { want: number }>): Map<string, number> {
  const out = new Map<string, number>();
  const order = [...nodes.entries()].sort((a, b) => a[1].want - b[1].want || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  let left = Math.max(0, limit);
  let remaining = order.length;
  for (const [node, { want }] of order) {
    const even = Math.floor(left / remaining);
    const give = Math.min(want, even);
    out.set(node, give);
    left -= give;
    remaining -= 1;
  }
  return out;
}
