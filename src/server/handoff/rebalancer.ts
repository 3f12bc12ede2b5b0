/**
 * Moves partitions to where the placement wants them, one at a time: after every change
 * of the members, the partition records or the operator's overrides, each partition this
 * node holds whose desired owner (placement.ts) is another *eligible* member is handed to
 * that member (partition-handoff.ts). That one rule covers a node that joins (the ring
 * gives it a share, its holders hand it over), a node that leaves on SIGTERM (it is not
 * active), a node an operator drained (it is not eligible) and a partition an operator
 * moved (its pin names another node).
 *
 * One handoff at a time per node keeps the stall of each partition short and the load
 * bounded; a failed handoff is retried after `retryMs`, not in a hot loop.
 */
import type { Logger } from "pino";
import type { Clock } from "../../base/clock.js";
import type { PartitionOwners } from "../../cluster/partition-owners.js";
import { handOffPartition, type HandoffDeps } from "./partition-handoff.js";

export class Rebalancer {
  private running = false;
  private again = false;
  private stopped = false;
  private cancelRetry = () => {};
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly deps: HandoffDeps & {
    owners: PartitionOwners; clock: Clock; logger: Logger; retryMs: number;
    /** Why `p` goes to `to` (a metric label: rebalance, drain, move). */
    cause: (p: number, to: string) => string;
    onHandoffFailed?: (cause: string) => void;
  }) {}

  /** Something changed: look again (coalesced; runs after the current handoff). */
  poke(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.run().finally(() => {
      this.running = false;
      if (this.again) {
        this.again = false;
        this.poke();
      } else {
        for (const wake of this.idleWaiters.splice(0)) wake();
      }
    });
  }

  /** Partitions this node holds that the placement gives to another eligible member. */
  misplaced(): Array<{ p: number; to: string }> {
    const { owners } = this.deps;
    const active = new Set(owners.eligibleMembers());
    return owners.held().flatMap((p) => {
      const to = owners.desiredOwner(p);
      return to !== undefined && to !== owners.nodeId && active.has(to) ? [{ p, to }] : [];
    });
  }

  /** Resolves once nothing is misplaced and no handoff runs, or after `timeoutMs` (false). */
  async settled(timeoutMs: number): Promise<boolean> {
    const deadline = this.deps.clock.nowMs() + timeoutMs;
    this.poke();
    while (this.running || this.misplaced().length > 0) {
      const left = deadline - this.deps.clock.nowMs();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const cancel = this.deps.clock.setTimer(left, resolve);
        this.idleWaiters.push(() => {
          cancel();
          resolve();
        });
        if (!this.running) this.poke();
      });
    }
    return true;
  }

  stop(): void {
    this.stopped = true;
    this.cancelRetry();
  }

  private async run(): Promise<void> {
    const addresses = new Map(this.deps.owners.others().map((m) => [m.nodeId, m.address]));
    for (const { p, to } of this.misplaced()) {
      if (this.stopped) return;
      const address = addresses.get(to);
      if (!address) continue;
      try {
        await handOffPartition(p, { nodeId: to, address }, this.deps.cause(p, to), this.deps);
      } catch (err) {
        this.deps.logger.warn({ err, partition: p, to }, "handoff failed; retrying later");
        this.deps.onHandoffFailed?.(this.deps.cause(p, to));
        this.cancelRetry();
        this.cancelRetry = this.deps.clock.setTimer(this.deps.retryMs, () => this.poke());
        return;
      }
    }
  }
}
