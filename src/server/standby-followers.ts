/**
 * Warm standbys (cluster part 2): for every partition the placement names this node a
 * standby of (the first `cluster_standbys` members after the partition's desired owner on
 * the ring, placement.ts), a follower of the partition's changelog applies each entry to
 * this node's SQLite as it is stored, moving the partition's log position with it
 * (log-catch-up.ts). The rows stay invisible here (this node does not hold the
 * partition); they exist so that a takeover, which the first standby is the one to make,
 * catches up only the follower's lag instead of replaying the whole log.
 *
 * Following is an optimisation, never a source of truth: a claim always catches up from
 * the position to the log's last sequence before its fence, whatever the follower did.
 * So a follower that falls behind, stops on a log outage, or fails costs time, not data.
 * Rules that keep it off an owner's rows:
 * - a partition this node holds, claims or hands off is never followed, nor one whose log
 *   it is opening or holds open (its view of the records may lag its own claim);
 * - a claim pauses the partition's follower and waits for its entry in flight before its
 *   catch-up (`pause`), and opening the partition clears its position, after which
 *   `applyFollowed` refuses every entry.
 */
import type { Logger } from "pino";
import type { ChangeLog, Follower } from "../changelog/changelog.js";
import type { Route } from "../cluster/placement.js";
import { LogGap, type LogCatchUp } from "./log-catch-up.js";

/** What the followers need of the partition owners. */
export interface StandbyPlacement {
  readonly nodeId: string;
  readonly partitions: number;
  route(p: number): Route;
  standbys(p: number, count: number): string[];
}

interface Following {
  follower: Follower;
  /** Entries the log held beyond the last one applied, when it was delivered. */
  lag: { entries: number };
}

/** How soon a follower that failed is started again. */
const RESTART_AFTER_MS = 5_000;

export class StandbyFollowers {
  private readonly following = new Map<number, Following>();
  private readonly paused = new Map<number, number>();
  private stopped = false;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly deps: {
    log: ChangeLog;
    catchUp: LogCatchUp;
    placement: StandbyPlacement;
    /** `cluster_standbys`: how many members keep a warm copy of each partition (0: none). */
    count: number;
    /**
     * Does this node write p's log (a claim opening it, or open)? Never followed then,
     * whatever the records say: this node's view of them may lag its own claim, and a
     * standby's start rebuilds the rows from the snapshot.
     */
    writes?(p: number): boolean;
    logger: Logger;
  }) {}

  /** Partitions followed now. */
  get partitions(): number {
    return this.following.size;
  }

  /** Entries the followers have still to apply, summed (as of each one's last delivery). */
  get lag(): number {
    let sum = 0;
    for (const f of this.following.values()) sum += f.lag.entries;
    return sum;
  }

  /** Entries p's follower has still to apply (as of its last delivery); undefined when p is not followed here. */
  lagOf(p: number): number | undefined {
    return this.following.get(p)?.lag.entries;
  }

  /** Follows exactly the partitions this node should stand by for now (after a change of the members or the records). */
  refresh(): void {
    if (this.stopped) return;
    const { placement, count } = this.deps;
    for (let p = 0; p < placement.partitions; p++) {
      const wanted = count > 0 && !this.paused.has(p) && this.standsBy(p);
      if (wanted && !this.following.has(p)) this.start(p);
      else if (!wanted && this.following.has(p)) void this.end(p);
    }
  }

  /**
   * Stops following p until the returned function is called (a claim's catch-up runs
   * meanwhile); resolves once no entry of p is being applied.
   */
  async pause(p: number): Promise<() => void> {
    this.paused.set(p, (this.paused.get(p) ?? 0) + 1);
    await this.end(p);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.paused.get(p) ?? 1) - 1;
      if (left > 0) this.paused.set(p, left);
      else this.paused.delete(p);
      this.refresh();
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    await Promise.all([...this.following.keys()].map((p) => this.end(p)));
  }

  private standsBy(p: number): boolean {
    const { placement } = this.deps;
    if (this.deps.writes?.(p)) return false;
    const kind = placement.route(p).kind;
    // Held, being claimed or being handed off here: the rows are an owner's.
    if (kind === "local" || kind === "claim" || kind === "moving") return false;
    return placement.standbys(p, this.deps.count).includes(placement.nodeId);
  }

  private start(p: number): void {
    const { log, catchUp, logger } = this.deps;
    const lag = { entries: 0 };
    let follower: Follower | undefined;
    let ended = false;
    let starting: Promise<void> = Promise.resolve();
    const following: Following = {
      lag,
      // Until the rows are ready (a snapshot may be loading), stopping waits for that
      // write to end: a claim's catch-up must never run beside a standby's rebuild.
      follower: {
        stopped: Promise.resolve(),
        stop: async () => {
          ended = true;
          await starting;
          await follower?.stop();
        },
      },
    };
    this.following.set(p, following);
    starting = (async () => {
      let after: number;
      try {
        after = await catchUp.standbyFrom(p);
      } catch (err) {
        if (this.following.get(p) === following) this.following.delete(p);
        logger.warn({ err, partition: p }, "could not prepare this node's rows of a partition to stand by for; trying again later");
        this.restartSoon();
        return;
      }
      if (ended || this.following.get(p) !== following) return;
      follower = log.follow(p, after, (entry, pending) => {
        lag.entries = pending;
        if (!catchUp.applyFollowed(p, entry)) throw new StandbyEnded();
      });
      following.follower = follower;
      follower.stopped.then(
        () => {},
        (err: unknown) => {
          if (this.following.get(p) === following) this.following.delete(p);
          if (err instanceof StandbyEnded || this.stopped) return;
          if (err instanceof LogGap) {
            // Entries were purged past this standby: start again from the snapshot.
            logger.info({ partition: p, at: err.at }, "a standby fell behind a purge of the partition's changelog; starting again from its snapshot");
            this.refresh();
            return;
          }
          logger.warn({ err, partition: p }, "a standby's follower of a partition's changelog stopped; following again later");
          this.restartSoon();
        });
      logger.debug({ partition: p, after }, "standing by for a partition (following its changelog)");
    })();
  }

  private async end(p: number): Promise<void> {
    const following = this.following.get(p);
    if (!following) return;
    this.following.delete(p);
    await following.follower.stop();
  }

  private restartSoon(): void {
    if (this.restartTimer || this.stopped) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.refresh();
    }, RESTART_AFTER_MS);
    this.restartTimer.unref();
  }
}

/** A followed partition's rows have no position any more: this node owns it now. */
class StandbyEnded extends Error {
  constructor() {
    super("this node owns the partition now");
  }
}
