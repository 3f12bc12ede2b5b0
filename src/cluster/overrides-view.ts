/**
 * This node's view of the operator's placement overrides (`placement/` in etcd: drained
 * nodes and pinned partitions): read, then watched, read again whenever the watch ends.
 * Every node keeps one, as it does for the members and the partition records, so each
 * rebalancer sees a drain or a move within a watch event and acts on its own partitions.
 */
import type { Clock } from "../base/clock.js";
import type { ClusterLogger } from "./cluster-member.js";
import { applyOverride, WatchCompactedError, type Coordination, type OverrideChange, type PlacementOverrides, type Watch } from "./coordination.js";

export interface OverridesViewOptions {
  coordination: Coordination;
  clock: Clock;
  logger: ClusterLogger;
  /** How long to wait before watching again after a watch ended. */
  rewatchMs: number;
  /** Called after every change seen (the read, or a watched change). */
  onChange: () => void;
}

export class OverridesView implements PlacementOverrides {
  readonly drains = new Set<string>();
  readonly pins = new Map<number, string>();
  private revision = 0;
  private watch: Watch | undefined;
  private stopped = false;

  constructor(private readonly options: OverridesViewOptions) {}

  /** Reads the overrides and watches them; resolves once the first read is in. */
  start(): Promise<void> {
    return this.resync();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.watch?.cancel().catch(() => {});
  }

  async refresh(): Promise<void> {
    const read = await this.options.coordination.overrides();
    this.drains.clear();
    this.pins.clear();
    for (const d of read.drains) this.drains.add(d);
    for (const [p, node] of read.pins) this.pins.set(p, node);
    this.revision = Math.max(this.revision, read.revision);
    this.options.onChange();
  }

  private async resync(): Promise<void> {
    const { coordination, logger, clock } = this.options;
    await this.watch?.cancel().catch(() => {});
    await this.refresh();
    let ended = false;
    this.watch = await coordination.watchOverrides(this.revision + 1, (change) => this.apply(change), (err) => {
      if (ended || this.stopped) return;
      ended = true;
      logger.warn({ err, compacted: err instanceof WatchCompactedError }, "placement overrides watch ended; reading them again");
      const again = () => {
        if (this.stopped) return;
        this.resync().catch((e: unknown) => {
          logger.error({ err: e }, "could not watch the placement overrides again; retrying");
          clock.setTimer(this.options.rewatchMs, again);
        });
      };
      clock.setTimer(err instanceof WatchCompactedError ? 0 : this.options.rewatchMs, again);
    });
  }

  private apply(change: OverrideChange): void {
    if (change.revision <= this.revision) return;
    this.revision = change.revision;
    applyOverride(this, change);
    this.options.onChange();
  }
}
