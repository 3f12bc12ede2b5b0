/**
 * Which of a worker's lease loops polls which queue (pure: no I/O, the clock passed in).
 *
 * Every queue starts on the main loop, the one on the worker's configured address. A
 * Lease answer's `routes` name the node holding each queue the answering node does not
 * hold; those queues move to a loop on that node's address, so each owner's long poll
 * parks on its own queues. A loop that cannot use its node (unreachable, or the node
 * says it is not the owner) hands its queues back to the main loop, which learns their
 * routes again; routes to that address are then ignored for a cool-down that doubles
 * with each hand-back (up to ROUTE_COOLDOWN_MAX_MS), so an owner the worker cannot reach
 * (but its node can) does not make the queues bounce between loops in a tight cycle.
 */

/** The main loop's key: the worker's configured address, whatever the nodes advertise. */
export const MAIN = "";

const ROUTE_COOLDOWN_FIRST_MS = 1_000;
export const ROUTE_COOLDOWN_MAX_MS = 30_000;

export interface QueueRouteLike {
  queue: string;
  address: string;
}

export class QueuePlacement<Q extends { queue: string }> {
  private readonly at = new Map<string, string>();
  private readonly cooling = new Map<string, { untilMs: number; count: number }>();

  /** `mainAddress`: routes naming it (as some node advertises it) stay on the main loop. */
  constructor(private readonly queues: readonly Q[], private readonly mainAddress: string) {
    for (const q of queues) this.at.set(q.queue, MAIN);
  }

  /** The queues the loop at `address` polls, in the worker's order. */
  queuesOf(address: string): Q[] {
    return this.queues.filter((q) => this.at.get(q.queue) === address);
  }

  /** Addresses other than the main one that have queues to poll. */
  addresses(): string[] {
    return [...new Set(this.at.values())].filter((a) => a !== MAIN);
  }

  /**
   * Applies the routes of an answer from the loop at `from`. Only queues that loop polls
   * move (a late answer cannot undo a newer move). Returns whether anything moved.
   */
  route(from: string, routes: readonly QueueRouteLike[], nowMs: number): boolean {
    let moved = false;
    for (const r of routes) {
      if (r.address === "" || this.at.get(r.queue) !== from || this.coolingDown(r.address, nowMs)) continue;
      const to = r.address === this.mainAddress ? MAIN : r.address;
      if (to === from) continue;
      this.at.set(r.queue, to);
      moved = true;
    }
    return moved;
  }

  /** The loop at `from` cannot serve its queues: back to the main loop, and `from` cools down. */
  handBack(from: string, nowMs: number): void {
    if (from === MAIN) return;
    for (const [queue, at] of this.at) if (at === from) this.at.set(queue, MAIN);
    const count = (this.cooling.get(from)?.count ?? 0) + 1;
    const ms = Math.min(ROUTE_COOLDOWN_MAX_MS, ROUTE_COOLDOWN_FIRST_MS * 2 ** (count - 1));
    this.cooling.set(from, { untilMs: nowMs + ms, count });
  }

  /** A Lease call to `address` was answered: its cool-down, if any, starts over. */
  reached(address: string): void {
    this.cooling.delete(address);
  }

  /**
   * Whether routes to some address are being ignored now. Loops then let their node park
   * as it sees fit (no `poll_owners`): answers at once would carry routes nobody follows.
   */
  anyCoolingDown(nowMs: number): boolean {
    return [...this.cooling.keys()].some((a) => this.coolingDown(a, nowMs));
  }

  private coolingDown(address: string, nowMs: number): boolean {
    const c = this.cooling.get(address);
    return c !== undefined && nowMs < c.untilMs;
  }
}
