/**
 * What the parts of one queue's core share: the index of unfinished tasks, the dispatch
 * order, the due timers, the leases and the ranks, plus the output of the current turn
 * (effects to persist, events to report, whether parked leases should wake).
 *
 * Why one object: the parts (rule membership, fired groups, task exits, leases,
 * operator actions, admission) all read and write these, and handing each the whole
 * `QueueCore` would make every part depend on every other. They depend on this instead,
 * and on the parts built before them, so dependencies stay one-way.
 *
 * Invariant: `entries` holds exactly the unfinished tasks; everything else that names a
 * task id is cleaned lazily against it (`liveReady`). Plain pending tasks are packed into
 * columns as they start waiting in the dispatch order (`waitPacked`) or at a saturated
 * key (`holdPacked`): see task-index.ts and packed-tasks.ts.
 */
import type { Random } from "../../base/random.js";
import type { CoreEvent, Effect } from "./effects.js";
import { DispatchRanks } from "./dispatch-ranks.js";
import { DueTimers } from "./due-timers.js";
import { LeaseTable } from "./lease-table.js";
import type { ReadyItem, SlotLedger } from "./key-slots.js";
import { ReadyQueues } from "./ready-queues.js";
import type { GroupConfig } from "./group-aggregator.js";
import type { RateLimitSpec } from "./token-bucket.js";
import type { TaskIndexEntry } from "./task.js";
import type { CronCalendar } from "./schedule.js";
import { PackedTasks } from "./packed-tasks.js";
import { TaskIndex } from "./task-index.js";

export interface CoreConfig {
  /** How long a lease lives without a heartbeat. */
  leaseTtlMs: number;
  /** The rate limit of queues without an override; undefined = unlimited. */
  defaultRateLimit?: RateLimitSpec;
  /** Group thresholds of groups without an override (server config). */
  groupDefaults: GroupConfig;
  /**
   * False keeps every unfinished task as an entry object, never packed: the reference
   * the packed index is compared with in tests. Default true.
   */
  packPending?: boolean;
}

export interface CoreDeps {
  random: Random;
  /** A fresh, unique id: lease ids (fencing tokens for settle and heartbeat) and batch ids. */
  newId: () => string;
  /** The node's ledger of shared (named) rules; `watch` asks to be woken when a slot frees. */
  sharedSlots?: SlotLedger & { watch(slot: string): void };
  /** Cron arithmetic for schedules (a cron library in the server); without it, cron schedules are refused. */
  cron?: CronCalendar;
}

export interface TurnOutput {
  effects: Effect[];
  events: CoreEvent[];
  readyChanged: boolean;
}

export class CoreMemory {
  private readonly packed = new PackedTasks();
  readonly entries = new TaskIndex(this.packed);
  /** Ready tasks filed by type, so that a lease pops only the types its worker handles. */
  readonly ready = new ReadyQueues((id) => this.entries.typeOf(id), this.packed);
  readonly due = new DueTimers();
  readonly leases = new LeaseTable();
  readonly ranks = new DispatchRanks();
  private output: TurnOutput = { effects: [], events: [], readyChanged: false };

  constructor(
    readonly queue: string,
    readonly config: CoreConfig,
    readonly deps: CoreDeps,
  ) {}

  persist(effect: Effect): void {
    this.output.effects.push(effect);
  }

  report(event: CoreEvent): void {
    this.output.events.push(event);
  }

  /** Something may have become dispatchable; the shell wakes parked leases. */
  markReadyChanged(): void {
    this.output.readyChanged = true;
  }

  /** A task handed back to the dispatch order (a freed or woken slot). */
  pushReady(item: ReadyItem): void {
    this.ready.pushTask(item);
    this.output.readyChanged = true;
  }

  /** The pending entry a ready item still stands for (unpacked, to be acted on); undefined when it moved on. */
  liveReady(item: ReadyItem): TaskIndexEntry | undefined {
    return this.isLiveReady(item) ? this.entries.get(item.id) : undefined;
  }

  /** Whether a ready or held item still stands for its pending task (never unpacks). */
  isLiveReady(item: ReadyItem): boolean {
    return this.entries.isPendingAt(item.id, item.seq);
  }

  /**
   * Puts a pending entry that waits alone in the dispatch order there as a packed slot;
   * false when it is not packable (the caller pushes a ready item instead). After true,
   * `e` is a detached copy: read it, never change it.
   */
  waitPacked(e: TaskIndexEntry): boolean {
    if (this.config.packPending === false) return false;
    const slot = this.entries.pack(e, true);
    if (slot === undefined) return false;
    this.ready.pushPacked(e.type, slot);
    return true;
  }

  /**
   * A loaded row that is packable waits packed, straight from the row (which the index
   * does not keep); false when it is not (the caller builds its entry object).
   */
  waitPackedLoaded(row: TaskIndexEntry): boolean {
    if (this.config.packPending === false) return false;
    const slot = this.entries.packNew(row);
    if (slot === undefined) return false;
    this.ready.pushPacked(row.type, slot);
    this.output.readyChanged = true;
    return true;
  }

  /** A task just held at a saturated key waits packed too (a saturated key can hold most of a backlog). */
  holdPacked(e: TaskIndexEntry): void {
    if (this.config.packPending !== false) this.entries.pack(e, false);
  }

  /** Timers and packed heap slots of tasks that moved on stay until their time; drop them when they pile up. */
  compactTimers(): void {
    const { entries, packed } = this;
    this.due.compact(entries.size, (id) => entries.view(id));
    this.ready.compactPacked(entries.size, (slot) => packed.isPacked(slot) || entries.isPendingAt(packed.idAt(slot), packed.seqAt(slot)));
  }

  /** Hands the shell what this turn must persist and report, and resets them. */
  drain(): TurnOutput {
    const out = this.output;
    this.output = { effects: [], events: [], readyChanged: false };
    return out;
  }
}
