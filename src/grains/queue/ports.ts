import type { Effect } from "./effects.js";
import type { RateLimitSpec } from "./token-bucket.js";
import type { GroupConfig } from "./group-aggregator.js";
import type { ScheduleState } from "./schedule.js";
import type { TaskIndexEntry, TaskRecord, TaskState } from "./task.js";

/** Durable per-queue settings the grain needs at activation. */
export interface QueueSettings {
  paused: boolean;
  /** Per-key concurrency limit; undefined = unlimited. */
  keyLimit?: number;
  /** Rate-limit override; undefined = the server default. */
  rateLimit?: RateLimitSpec;
  /** Group overrides by group name ("" = the queue default). */
  groupConfigs?: ReadonlyMap<string, GroupConfig>;
  /** Dynamic limits of this queue's own rule keys. */
  slotLimits?: ReadonlyMap<string, number>;
  /** The queue's schedules. */
  schedules?: readonly ScheduleState[];
}

/**
 * The grain's view of durable storage (implemented by src/storage). Writes are
 * synchronous and join the current group-commit transaction; the server awaits the
 * database's `committed()` (not part of this port: no grain waits for a commit) and
 * replies only after it.
 */
export interface QueueStore {
  /**
   * Unfinished tasks of a queue, in arrival order (group members and rule members in
   * order), read once by the core as they come: a store streams them rather than
   * building a list, which for a large backlog would dwarf the index it becomes.
   */
  loadUnfinished(queue: string): Iterable<TaskIndexEntry>;
  loadSettings(queue: string): QueueSettings;
  /** Where each of these ids lives, for ids that exist. */
  findIds(ids: readonly string[]): Map<string, { queue: string; state: TaskState }>;
  getTask(id: string): TaskRecord | undefined;
  /**
   * Applies a turn's effects, in order, inside the open transaction. Returns the rows of
   * the tasks the turn made active (what a delivery sends), read in the same statement.
   * All or nothing per call: if it throws, none of this turn's effects were written (the
   * other turns of the transaction are unaffected), and a storage failure is thrown as
   * a catalog ConveyorError.
   */
  apply(queue: string, effects: readonly Effect[]): ReadonlyMap<string, TaskRecord>;
  /**
   * The error a write would get now, known without trying it (the disk was full at the
   * last attempt and has not regained space since), or undefined when writes may be
   * tried. The grain asks before a turn that writes, so that a refused call leaves its
   * memory as it was instead of running ahead of disk.
   */
  writeRefusal(): Error | undefined;
  /** True when the queue has a settings row or any task (what "the queue exists" means). */
  queueExists(queue: string): boolean;
  /** True when any task row (in any state) names the queue. */
  hasTasks(queue: string): boolean;
  /** Up to `limit` tasks of the queue in `state` after row `afterRowid`, in row order, with payload sizes. */
  pageOfState(queue: string, state: TaskState, afterRowid: number, limit: number): Array<{ rowid: number; id: string; payloadBytes: number }>;
}
