/**
 * A queue's groups from the first member to the last delivery: members aggregating
 * (`GroupAggregator`), the sweep that fires them, and the fired batches that wait in the
 * dispatch order for a worker with a batch handler.
 *
 * Why a part of its own: a fired batch is one item in the dispatch order but many tasks
 * in the index. Keeping the batch's member set, its place in `ready` and the sweep
 * together is what lets a lease hand out exactly the members still pending, in arrival
 * order, and lets a member that leaves early (cancelled, archived) leave its batch.
 *
 * Invariant: a batch's entry in `ready` is live only while its seq matches and it still
 * has a pending member; the sweep is armed exactly while some group aggregates.
 */
import type { CoreMemory } from "./core-memory.js";
import { GroupAggregator, type GroupConfig } from "./group-aggregator.js";
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
  /** When the sweep that fires it runs (aggregating groups only; 0 otherwise). */
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
  private sweepAtMs: number | undefined;

  constructor(private readonly memory: CoreMemory) {}

  /** The type a group is bound to while it has members. */
  typeOf(group: string): string | undefined {
    return this.groups.typeOf(group);
  }

  /** Adds an aggregating member to its group (its arrival time is `readyAtMs`). */
  aggregate(e: TaskIndexEntry, nowMs: number): void {
    this.groups.add(e.group, e.type, e.id, e.readyAtMs);
    if (this.sweepAtMs === undefined) this.sweepAtMs = nowMs + this.memory.config.groupSweepIntervalMs;
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
    if (e.state === "aggregating") this.groups.remove(e.group, e.id);
    else if (e.state === "pending" && e.batchId !== "") this.batches.get(e.batchId)?.members.delete(e.id);
  }

  /** When the next sweep is due; undefined while no group aggregates. */
  get nextSweepAtMs(): number | undefined {
    return this.sweepAtMs;
  }

  /** The periodic group sweep, if due: fires every group whose threshold tripped. */
  sweepIfDue(nowMs: number): void {
    if (this.sweepAtMs === undefined || this.sweepAtMs > nowMs) return;
    const { entries } = this.memory;
    const fires = this.groups.sweep(nowMs, (g) => this.configOf(g), (id) => entries.get(id)?.readyAtMs ?? nowMs);
    for (const fire of fires) {
      const batchId = this.memory.deps.newId();
      for (const id of fire.memberIds) {
        const e = entries.get(id)!;
        e.state = "pending";
        e.batchId = batchId;
        this.memory.markReadyChanged();
        this.addToBatch(e);
        this.memory.persist({ kind: "fireGroup", entry: { ...e } });
      }
      this.memory.report({ kind: "group_fired", size: fire.memberIds.length });
    }
    this.sweepAtMs = this.groups.size > 0 ? nowMs + this.memory.config.groupSweepIntervalMs : undefined;
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
   * Sets or (undefined) clears a group override ("" = the queue default); applies at the
   * next sweep. False when there was nothing to clear.
   */
  setConfig(group: string, config: GroupConfig | undefined, nowMs: number): boolean {
    if (config) {
      this.configs.set(group, config);
      this.memory.persist({ kind: "setGroupConfig", group, config, atMs: nowMs });
      return true;
    }
    if (!this.configs.delete(group)) return false;
    this.memory.persist({ kind: "deleteGroupConfig", group });
    return true;
  }

  /** Live groups and fired batches that wait for a worker. */
  list(): GroupStatus[] {
    const out: GroupStatus[] = this.groups.list().map((v) => {
      const config = this.configOf(v.group);
      const dueAt = v.size >= config.maxSize ? 0 : GroupAggregator.fireAtMs(v, config);
      return { ...v, state: "aggregating" as const, nextFireAtMs: this.sweepAt(dueAt), config };
    });
    for (const batch of this.batches.values()) {
      const members = [...batch.members].map((id) => this.memory.entries.get(id)).filter((e): e is TaskIndexEntry => e?.state === "pending");
      if (members.length === 0) continue;
      const group = members[0]!.group;
      out.push({ group, type: batch.type, size: members.length, state: "ready", firstAtMs: 0, lastAtMs: 0, nextFireAtMs: 0, config: this.configOf(group) });
    }
    return out;
  }

  /** The first sweep at or after `atMs`. */
  private sweepAt(atMs: number): number {
    const first = this.sweepAtMs ?? atMs;
    if (atMs <= first) return first;
    const interval = this.memory.config.groupSweepIntervalMs;
    return first + Math.ceil((atMs - first) / interval) * interval;
  }
}
