/**
 * Hosts the queue grains of one node: activates a grain on first use, passivates it
 * after `idleMs` without calls, and remembers when a passivated grain must wake on
 * its own (a scheduled task coming due, a lease lapsing) so that timers survive
 * passivation.
 *
 * Grain memory is disposable: deactivation (idle, storage failure, shutdown, a handoff,
 * rows replaced from outside) only drops it, and the next activation rebuilds it from storage.
 */
import type { Logger } from "pino";
import { nodeStopping } from "../../base/errors.js";
import type { Clock } from "../../base/clock.js";
import type { Random } from "../../base/random.js";
import { QueueCore, type CoreConfig } from "../queue/queue-core.js";
import { QueueGrain, type GrainHooks } from "../queue/queue-grain.js";
import type { QueueStore } from "../queue/ports.js";
import type { CronCalendar } from "../queue/schedule.js";
import type { SharedSlotLedger } from "./shared-slots.js";

/**
 * Why a grain left memory. `replaced`: its queue's rows were replaced outside the grains
 * (a handoff's load, a catch-up from the changelog), so its memory describes rows that no
 * longer exist: the next activation reads the new ones.
 */
export type DeactivationReason = "idle" | "failed" | "shutdown" | "removed" | "replaced";

export interface GrainHostOptions {
  store: QueueStore;
  clock: Clock;
  random: Random;
  /** A fresh, unique id (lease and batch ids). */
  newId: () => string;
  core: CoreConfig;
  /** Passivate a grain after this long without calls. */
  idleMs: number;
  logger: Logger;
  hooks: Pick<GrainHooks, "onEvents" | "onTasksEnded" | "onApplied">;
  onLifecycle?: (queue: string, event: "activated" | DeactivationReason) => void;
  /** The node's shared-rule ledger. */
  sharedSlots: SharedSlotLedger;
  /** Cron arithmetic for schedules. */
  cron?: CronCalendar;
  /**
   * Where a grain's failed write is reported (the node rate-limits these lines: a full
   * disk fails every write); default: logged with the error.
   */
  onWriteFailed?: (queue: string, error: unknown) => void;
  /** A call refused before its turn because storage refuses writes (see QueueStore.writeRefusal). */
  onWriteRefused?: (queue: string, error: Error) => void;
}

/** The idle sweep runs every half grain_idle_timeout, but at most this often. */
const IDLE_SWEEP_MIN_INTERVAL_MS = 10;

/**
 * What the host needs from the parts built on top of it (the router, the lease broker),
 * given once they exist: `link` closes the cycle explicitly instead of a late-bound
 * variable. Until then, nothing is pinned, readiness goes nowhere, and a reminder
 * activates the grain here.
 */
export interface GrainHostLinks {
  /** Something may have become dispatchable in `queue` (after the turn's writes). */
  onReady(queue: string): void;
  /** True while something outside (a parked lease call) needs the grain in memory. */
  isPinned(queue: string): boolean;
  /**
   * A passivated grain's reminder came due. The node sends it through its router (a
   * queue placed on another node since is not this node's to wake).
   */
  onReminder(queue: string): void;
}

export class GrainHost {
  private readonly grains = new Map<string, QueueGrain>();
  private readonly reminders = new Map<string, () => void>();
  private cancelSweep: (() => void) | undefined;
  private stopped = false;

  private links: GrainHostLinks = {
    onReady: () => {},
    isPinned: () => false,
    onReminder: (queue) => void this.get(queue),
  };

  constructor(private readonly options: GrainHostOptions) {}

  /** Links the host to the parts built on it (see GrainHostLinks). */
  link(links: GrainHostLinks): void {
    this.links = links;
  }

  /** Starts the idle sweep. */
  start(): void {
    this.scheduleSweep();
  }

  /** The grain for `queue`, activated from storage if it is not in memory. */
  get(queue: string): QueueGrain {
    const existing = this.grains.get(queue);
    if (existing) return existing;
    if (this.stopped) throw nodeStopping();
    this.reminders.get(queue)?.();
    this.reminders.delete(queue);
    const { store, clock, random, newId, core, hooks } = this.options;
    const logger = this.loggerOf(queue);
    const sharedSlots = this.options.sharedSlots.forQueue(queue);
    const grain = new QueueGrain(queue, new QueueCore(queue, core, { random, newId, sharedSlots, ...(this.options.cron ? { cron: this.options.cron } : {}) }), store, clock, {
      onEvents: hooks.onEvents,
      ...(hooks.onTasksEnded ? { onTasksEnded: hooks.onTasksEnded } : {}),
      ...(hooks.onApplied ? { onApplied: hooks.onApplied } : {}),
      onReady: (q) => this.links.onReady(q),
      onFailure: (q, error) => {
        if (this.options.onWriteFailed) this.options.onWriteFailed(q, error);
        else logger.error({ err: error }, "grain storage write failed; deactivating");
        this.deactivate(q, "failed");
      },
      ...(this.options.onWriteRefused ? { onRefused: this.options.onWriteRefused } : {}),
    });
    this.grains.set(queue, grain);
    grain.activate();
    this.options.onLifecycle?.(queue, "activated");
    logger.debug("grain activated");
    return grain;
  }

  /** A child logger per grain: every line names the grain (never a payload). */
  private loggerOf(queue: string): Logger {
    return this.options.logger.child({ grain: `queue/${queue}` });
  }

  /** Grains currently in memory. */
  activeQueues(): string[] {
    return [...this.grains.keys()];
  }

  peek(queue: string): QueueGrain | undefined {
    return this.grains.get(queue);
  }

  deactivate(queue: string, reason: DeactivationReason): void {
    const grain = this.grains.get(queue);
    if (!grain) return;
    this.grains.delete(queue);
    const wakeAtMs = grain.nextWakeAtMs();
    grain.deactivate();
    if (reason === "idle" && wakeAtMs !== undefined) this.remind(queue, wakeAtMs);
    this.options.onLifecycle?.(queue, reason);
    this.loggerOf(queue).debug({ reason }, "grain deactivated");
  }

  /** Drops the grain of a queue that was removed (DeleteQueue): no reminder is kept. */
  retire(queue: string): void {
    this.deactivate(queue, "removed");
  }

  /** Deactivates every grain (storage rolled back, or the node stops). */
  deactivateAll(reason: DeactivationReason): void {
    for (const queue of [...this.grains.keys()]) this.deactivate(queue, reason);
  }

  stop(): void {
    this.stopped = true;
    this.cancelSweep?.();
    for (const cancel of this.reminders.values()) cancel();
    this.reminders.clear();
    this.deactivateAll("shutdown");
  }

  private remind(queue: string, atMs: number): void {
    const { clock } = this.options;
    this.reminders.set(queue, clock.setTimer(atMs - clock.nowMs(), () => {
      this.reminders.delete(queue);
      if (!this.stopped) this.links.onReminder(queue);
    }));
  }

  private scheduleSweep(): void {
    const { clock, idleMs } = this.options;
    this.cancelSweep = clock.setTimer(Math.max(IDLE_SWEEP_MIN_INTERVAL_MS, Math.floor(idleMs / 2)), () => {
      this.passivateIdle();
      if (!this.stopped) this.scheduleSweep();
    });
  }

  private passivateIdle(): void {
    const cutoff = this.options.clock.nowMs() - this.options.idleMs;
    for (const [queue, grain] of this.grains) {
      if (grain.lastUsedMs <= cutoff && !this.links.isPinned(queue)) this.deactivate(queue, "idle");
    }
  }
}
