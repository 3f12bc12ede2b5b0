/**
 * The seam between the services and a queue's grain. A `QueueRef` is what the router
 * hands out for a queue: every method returns a Promise that resolves once the queue's
 * *owner* has committed what the call did, so a service can reply as soon as it resolves
 * ("never answer before the commit" holds wherever the owner is). Today every owner is
 * this node and the only implementation is `LocalQueueRef`: one synchronous grain turn,
 * then the node's group commit. A remote implementation (the cluster issue) forwards
 * the same calls to the owner, which answers after its own commit; callers do not change.
 *
 * A ref is a handle on a queue, not on a grain instance: it resolves the grain on every
 * call, so a grain passivated or dropped in between is simply activated again.
 *
 * Each call runs its turn synchronously when it is made (before its first await), so
 * calls made in one event-loop turn still share one commit.
 */
import { ConveyorError } from "../../base/errors.js";
import type { EnqueueOutcome, GroupStatus, LeaseStatusView, ScheduleAnswer, ScheduleCommand, Settlement } from "../queue/queue-core.js";
import type { GroupConfig } from "../queue/group-aggregator.js";
import type { QueueStore } from "../queue/ports.js";
import type { LeasedDelivery, QueueGrain, TaskAction } from "../queue/queue-grain.js";
import { NO_BATCHES, type LeaseCaps } from "../queue/ready-queues.js";
import type { CancelReason, NewTask, TaskRecord, TaskState } from "../queue/task.js";
import type { BulkAction } from "../queue/bulk-actions.js";
import { runBulkAction, runQueueRemoval } from "./bulk-runner.js";
import type { RateLimitSpec } from "../queue/token-bucket.js";

/** Live counts of a grain in memory. */
export type GrainStats = ReturnType<QueueGrain["stats"]>;

export interface QueueRef {
  readonly queue: string;
  /** Brings the queue's grain into memory (start-up, a reminder coming due). */
  activate(): Promise<void>;
  /**
   * Admits tasks in one turn. A non-atomic call whose turn the data file refuses for one
   * task's own values (STORAGE_REJECTED) is admitted again one task per turn, so the
   * refused task fails alone; any other failure of the turn is every task's outcome.
   * Rejects when the commit fails (then nothing of the call is acknowledged).
   */
  enqueue(tasks: readonly NewTask[], atomic: boolean): Promise<EnqueueOutcome[]>;
  /** Takes what is dispatchable now (no waiting: long polls are the lease broker's). */
  lease(max: number, caps?: LeaseCaps): Promise<LeasedDelivery[]>;
  heartbeat(leaseIds: readonly string[]): Promise<LeaseStatusView[]>;
  settle(items: readonly Settlement[]): Promise<(ConveyorError | null)[]>;
  /** Payload sizes of unfinished tasks (0 for others): what settling them rewrites. A read. */
  payloadBytesOf(taskIds: readonly string[]): Promise<number[]>;
  /** An action on one task of this queue; resolves with its row afterwards, rejects with the action's error. */
  act(id: string, action: TaskAction, reason?: CancelReason): Promise<TaskRecord | undefined>;
  setPaused(paused: boolean): Promise<void>;
  setKeyLimit(limit: number | undefined): Promise<void>;
  setRateLimit(spec: RateLimitSpec | undefined): Promise<void>;
  /** Resolves with whether something changed (false: deleting a config that was not there). */
  setGroupConfig(group: string, config: GroupConfig | undefined): Promise<boolean>;
  /** The queue's groups (activates the grain: groups live in its memory). */
  listGroups(): Promise<GroupStatus[]>;
  /** Live counts when the grain is in memory; undefined otherwise (never activates it). */
  stats(): Promise<GrainStats | undefined>;
  /** A shared slot this queue watches was freed; a grain not in memory needs no wake. */
  wakeSlot(slot: string): Promise<void>;
  /** An operator's command on one of the queue's schedules (rejects: not found, full). */
  schedule(cmd: ScheduleCommand): Promise<ScheduleAnswer>;
  /** `action` on every task of the queue in `state`, in batches (see bulk-runner.ts); resolves with how many changed. */
  bulkAct(action: BulkAction, state: TaskState): Promise<number>;
  /** Removes the queue (its finished tasks and settings) unless it holds unfinished tasks; its grain goes. Resolves with the finished tasks deleted. */
  remove(): Promise<number>;
}

/** The grains of this node, as the local ref needs them (the grain host). */
export interface LocalGrains {
  /** The grain, activated from storage if it is not in memory. */
  get(queue: string): QueueGrain;
  /** The grain if it is in memory. */
  peek(queue: string): QueueGrain | undefined;
  /** Drops the grain of a removed queue from memory. */
  retire(queue: string): void;
}

/** A queue owned by this node: a synchronous grain turn, then the node's group commit. */
export class LocalQueueRef implements QueueRef {
  constructor(
    readonly queue: string,
    private readonly grains: LocalGrains,
    /**
     * The store's rows, and durability (`committed`: not part of the grain's port): the
     * node's group commit, and on a cluster with a changelog the queue's partition log.
     */
    private readonly store: Pick<QueueStore, "getTask"> & { committed(queue: string): Promise<void> },
  ) {}

  private get grain(): QueueGrain {
    return this.grains.get(this.queue);
  }

  /** Resolves with `value` once everything written so far (this turn included) is committed. */
  private async afterCommit<T>(value: T): Promise<T> {
    await this.store.committed(this.queue);
    return value;
  }

  activate(): Promise<void> {
    return this.run(() => {
      this.grain;
    });
  }

  enqueue(tasks: readonly NewTask[], atomic: boolean): Promise<EnqueueOutcome[]> {
    return this.run(() => this.admit(tasks, atomic));
  }

  private admit(tasks: readonly NewTask[], atomic: boolean): EnqueueOutcome[] {
    try {
      return this.grain.enqueue(tasks, atomic);
    } catch (error) {
      if (atomic || !(error instanceof ConveyorError)) throw error;
      if (tasks.length > 1 && error.reason === "STORAGE_REJECTED") return tasks.flatMap((task) => this.admit([task], false));
      return tasks.map(() => ({ ok: false as const, error }));
    }
  }

  lease(max: number, caps: LeaseCaps = NO_BATCHES): Promise<LeasedDelivery[]> {
    return this.run(() => this.grain.lease(max, caps));
  }

  heartbeat(leaseIds: readonly string[]): Promise<LeaseStatusView[]> {
    return this.run(() => this.grain.heartbeat(leaseIds));
  }

  settle(items: readonly Settlement[]): Promise<(ConveyorError | null)[]> {
    return this.run(() => this.grain.settle(items));
  }

  payloadBytesOf(taskIds: readonly string[]): Promise<number[]> {
    try {
      return Promise.resolve(this.grain.payloadBytesOf(taskIds));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async act(id: string, action: TaskAction, reason?: CancelReason): Promise<TaskRecord | undefined> {
    const error = this.grain.act(id, action, reason);
    if (error) throw error;
    await this.store.committed(this.queue);
    return this.store.getTask(id);
  }

  setPaused(paused: boolean): Promise<void> {
    return this.run(() => this.grain.setPaused(paused));
  }

  setKeyLimit(limit: number | undefined): Promise<void> {
    return this.run(() => this.grain.setKeyLimit(limit));
  }

  setRateLimit(spec: RateLimitSpec | undefined): Promise<void> {
    return this.run(() => this.grain.setRateLimit(spec));
  }

  setGroupConfig(group: string, config: GroupConfig | undefined): Promise<boolean> {
    return this.run(() => this.grain.setGroupConfig(group, config));
  }

  listGroups(): Promise<GroupStatus[]> {
    return this.run(() => this.grain.listGroups());
  }

  stats(): Promise<GrainStats | undefined> {
    return Promise.resolve(this.grains.peek(this.queue)?.stats());
  }

  wakeSlot(slot: string): Promise<void> {
    return this.run(() => this.grains.peek(this.queue)?.wakeSlot(slot));
  }

  schedule(cmd: ScheduleCommand): Promise<ScheduleAnswer> {
    return this.run(() => this.grain.schedule(cmd));
  }

  bulkAct(action: BulkAction, state: TaskState): Promise<number> {
    return runBulkAction((turn) => this.run(() => turn(this.grain)), action, state);
  }

  remove(): Promise<number> {
    return runQueueRemoval((turn) => this.run(() => turn(this.grain)), () => this.grains.retire(this.queue));
  }

  /** Runs `turn` now (synchronously) and resolves with its value after the commit. */
  private run<T>(turn: () => T): Promise<T> {
    try {
      return this.afterCommit(turn());
    } catch (error) {
      return Promise.reject(error);
    }
  }
}
