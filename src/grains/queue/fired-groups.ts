/**
 * A queue's groups from the first member to the last delivery: members aggregating
 * (`GroupAggregator`), the decisions that fire them, and the fired batches that wait in
 * the dispatch order for a worker with a batch handler.
 *
 * Why a part of its own: a fired batch is one item in the dispatch order but many tasks
 * in the index. Keeping the batch's member set, its place in `ready` and the fire
 * decisions together is what lets a lease hand out exactly the members still pending, in
 * arrival order, and lets a member that leaves early (cancelled, archived) leave its batch.
 *
 * When a group fires is decided by events, never by a periodic sweep: a member's arrival
 * fires a group that reaches its max size in the same turn; a group's time threshold
 * (max delay or grace) is a deadline in `GroupDeadlines`, which the grain's one timer
 * covers; a config change reviews the groups it governs at once (a group now over its
 * max size fires, a moved deadline is re-armed, a passed one fires).
 *
 * Invariant: a batch's entry in `ready` is live only while its seq matches and it still
 * has a pending member; every aggregating group holds fewer than its max size members
 * (after the turn that changed it) and has exactly one current deadline.
 */
import type { CoreMemory } from "./core-memory.js";
import { GroupAggregator, type Fire, type GroupConfig } from "./group-aggregator.js";
import { GroupDeadlines } from "./group-deadlines.js";
import type { ReadyItem } from "./key-slots.js";
import type { TaskIndexEntry } from "./task.js";

/** A group waiting to fire, or a fired batch waiting for a worker. */
export interface GroupStatus {
  group: string;
  type: string;
  size: number;
  /** "aggregating": filling up; "ready": fired, waiting for a worker with a batch handler. */
  state: "aggregating" | "ready";
  firstAtMs: number;
  lastAtMs: number;
  /** When it fires by time, max delay or grace (aggregating groups only; 0 otherwise). */
  nextFireAtMs: number;
  config: GroupConfig;
}

interface BatchState {
  type: string;
  priority: number;
  seq: number;
  members: Set<string>;
}

export class FiredGroups {
  private readonly groups = new GroupAggregator();
  /** Fired batches waiting in `ready`, by batch id. */
  private readonly batches = new Map<string, BatchState>();
  /** Per-group threshold overrides; the key "" is the queue-wide default. */
  private readonly configs = new Map<string, GroupConfig>();
  /** Each aggregating group's time threshold, for the grain's timer. */
  private readonly deadlines = new GroupDeadlines();

  constructor(private readonly memory: CoreMemory) {}

  /** The type a group is bound to while it has members. */
  typeOf(group: string): string | undefined {
    return this.groups.typeOf(group);
  }

  /**
   * Adds an aggregating member to its group (its arrival time is `readyAtMs`): the group
   * fires in this turn if the member fills it; otherwise its deadline follows the member.
   */
  aggregate(e: TaskIndexEntry): void {
    this.groups.add(e.group, e.type, e.id, e.readyAtMs);
    this.review(e.group);
  }

  /** Puts a pending member of batch `e.batchId` in the dispatch order, with its batch. */
  addToBatch(e: TaskIndexEntry): void {
    let batch = this.batches.get(e.batchId);
    if (!batch) {
      batch = { type: e.type, priority: e.priority, seq: e.seq, members: new Set() };
      this.batches.set(e.batchId, batch);
      this.memory.ready.pushBatch(e.type, { id: e.batchId, priority: e.priority, seq: e.seq });
    }
    batch.members.add(e.id);
  }

  /** The pending members of a batch in the dispatch order, in arrival order. */
  liveBatch(item: ReadyItem): TaskIndexEntry[] | undefined {
    const batch = this.batches.get(item.id);
    if (!batch || batch.seq !== item.seq) return undefined;
    const members = [...batch.members]
      .map((id) => this.memory.entries.get(id))
      .filter((e): e is TaskIndexEntry => !!e && e.state === "pending" && e.batchId === item.id)
      .sort((a, b) => a.seq - b.seq);
    if (members.length === 0) this.batches.delete(item.id);
    return members;
  }

  /** A batch was handed to a worker: it leaves the waiting batches. */
  delivered(batchId: string): void {
    this.batches.delete(batchId);
  }

  /** Takes a waiting entry out of its group or batch (it is leaving memory or its state). */
  unlink(e: TaskIndexEntry): void {
    if (e.state === "aggregating") {
      this.groups.remove(e.group, e.id);
      // The group's arrivals, hence its deadline, stay; only an emptied group stops waiting.
      if (this.groups.typeOf(e.group) === undefined) this.deadlines.disarm(e.group);
    } else if (e.state === "pending" && e.batchId !== "") this.batches.get(e.batchId)?.members.delete(e.id);
  }

  /** The earliest deadline of a group; undefined while no group aggregates. */
  get nextFireAtMs(): number | undefined {
    return this.deadlines.nextAtMs();
  }

  /** Fires every group whose time threshold has come at `nowMs` (the grain's timer went off). */
  fireDue(nowMs: number): void {
    for (let group = this.deadlines.popDue(nowMs); group !== undefined; group = this.deadlines.popDue(nowMs)) {
      const fire = this.groups.take(group, this.configOf(group).maxSize, this.arrivalOf);
      if (fire) this.fire(fire);
      this.review(group);
    }
  }

  /**
   * Applies a group's thresholds now: fires it while it holds its max size (oldest members
   * first), then arms its deadline from what is left. A deadline already passed is armed
   * too; `fireDue` in the same turn (a config change) or the grain's next tick fires it.
   */
  private review(group: string): void {
    const config = this.configOf(group);
    while (this.groups.isFull(group, config)) this.fire(this.groups.take(group, config.maxSize, this.arrivalOf)!);
    const atMs = this.groups.fireAtMs(group, config);
    if (atMs === undefined) this.deadlines.disarm(group);
    else this.deadlines.arm(group, atMs);
  }

  /** An aggregating member's arrival (members are unfinished, so always in the index). */
  private readonly arrivalOf = (id: string): number => this.memory.entries.get(id)!.readyAtMs;

  /** The members of a fire turn pending as one batch, in the dispatch order. */
  private fire(fire: Fire): void {
    const batchId = this.memory.deps.newId();
    for (const id of fire.memberIds) {
      const e = this.memory.entries.get(id)!;
      e.state = "pending";
      e.batchId = batchId;
      this.memory.markReadyChanged();
      this.addToBatch(e);
      this.memory.persist({ kind: "fireGroup", entry: { ...e } });
    }
    this.memory.report({ kind: "group_fired", size: fire.memberIds.length });
  }

  /** A group's thresholds: its override, else the queue default, else the server's. */
  configOf(group: string): GroupConfig {
    return this.configs.get(group) ?? this.configs.get("") ?? this.memory.config.groupDefaults;
  }

  /** Restores a durable override (at load: no effect to persist). */
  restoreConfig(group: string, config: GroupConfig): void {
    this.configs.set(group, config);
  }

  /** Deletes every group override of the queue (the queue is being removed). */
  clearConfigs(): void {
    for (const group of [...this.configs.keys()]) this.setConfig(group, undefined, 0);
  }

  /**
   * Sets or (undefined) clears a group override ("" = the queue default). It applies from
   * this decision on: the groups it governs are reviewed in this turn, so one now over its
   * max size or past its deadline fires at once, and the others wait for their new
   * deadline. False when there was nothing to clear.
   */
  setConfig(group: string, config: GroupConfig | undefined, nowMs: number): boolean {
    if (config) {
      this.configs.set(group, config);
      this.memory.persist({ kind: "setGroupConfig", group, config, atMs: nowMs });
    } else {
      if (!this.configs.delete(group)) return false;
      this.memory.persist({ kind: "deleteGroupConfig", group });
    }
    // The queue default governs every group without an override of its own.
    const governed = group === "" ? [...this.groups.names()].filter((g) => !this.configs.has(g)) : [group];
    for (const g of governed) this.review(g);
    this.fireDue(nowMs);
    return true;
  }

  /** Live groups and fired batches that wait for a worker. */
  list(): GroupStatus[] {
    const out: GroupStatus[] = this.groups.list().map((v) => {
      const config = this.configOf(v.group);
      return { ...v, state: "aggregating" as const, nextFireAtMs: GroupAggregator.timeFireAtMs(v, config), config };
    });
    for (const batch of this.batches.values()) {
      const members = [...batch.members].map((id) => this.memory.entries.get(id)).filter((e): e is TaskIndexEntry => e?.state === "pending");
      if (members.length === 0) continue;
      const group = members[0]!.group;
      out.push({ group, type: batch.type, size: members.length, state: "ready", firstAtMs: 0, lastAtMs: 0, nextFireAtMs: 0, config: this.configOf(group) });
    }
    return out;
  }
}
