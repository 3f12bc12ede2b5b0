/**
 * Admission of new tasks: which items of an enqueue call may enter the queue, and
 * entering them (index, unique key, rules, waiting place, strategies).
 *
 * Why a part of its own: an enqueue call is checked as a whole before anything is
 * stored (an atomic call admits all or nothing), and the checks must see the call's own
 * earlier items: two items with one chosen id, one unique key, or one group of two
 * types conflict with each other as they would with stored tasks.
 *
 * Invariant: a caller-chosen task id names one task per node and a unique key one
 * unfinished task per queue; a group holds tasks of one type while it has members.
 */
import { ConveyorError } from "../../base/errors.js";
import { quote } from "../../base/limits.js";
import type { CoreMemory } from "./core-memory.js";
import type { FiredGroups } from "./fired-groups.js";
import type { RuleMembership } from "./rule-membership.js";
import type { TaskExits } from "./task-exits.js";
import { indexEntry, type NewTask, type TaskState } from "./task.js";
import type { UniqueKeys } from "./unique-keys.js";
import type { WaitingTasks } from "./waiting-tasks.js";

export type EnqueueOutcome =
  | { ok: true; id: string; state: TaskState; existed: boolean }
  | { ok: false; error: ConveyorError };

/** What the shell knows about ids that are not in memory (finished tasks). */
export type KnownIds = ReadonlyMap<string, { queue: string; state: TaskState }>;

/** What the items of one call checked so far have claimed. */
interface Claims {
  ids: Set<string>;
  keys: Set<string>;
  groupTypes: Map<string, string>;
}

export class Admission {
  constructor(
    private readonly memory: CoreMemory,
    private readonly groups: FiredGroups,
    private readonly rules: RuleMembership,
    private readonly unique: UniqueKeys,
    private readonly waiting: WaitingTasks,
    private readonly exits: TaskExits,
  ) {}

  /**
   * Admits new tasks. With `atomic`, nothing is admitted when any item fails (the
   * outcomes still tell which items failed). `known` lists caller-chosen ids that
   * exist in storage but not in memory (finished tasks).
   */
  enqueue(tasks: readonly NewTask[], known: KnownIds, nowMs: number, atomic: boolean): EnqueueOutcome[] {
    const claims: Claims = { ids: new Set(), keys: new Set(), groupTypes: new Map() };
    this.memory.compactTimers();
    const outcomes = tasks.map((t) => this.check(t, known, nowMs, claims));
    const failure = outcomes.find((o) => !o.ok);
    if (atomic && failure) return outcomes;
    tasks.forEach((t, i) => {
      const o = outcomes[i]!;
      // The state after admission: a strategy or a failed rule may have ended the task.
      if (o.ok && !o.existed) outcomes[i] = { ...o, state: this.insert(t, nowMs) };
    });
    return outcomes;
  }

  private check(t: NewTask, known: KnownIds, nowMs: number, claims: Claims): EnqueueOutcome {
    const { queue } = this.memory;
    if (t.idChosen) {
      const live = this.memory.entries.stateOf(t.id);
      if (live) return { ok: true, id: t.id, state: live, existed: true };
      const stored = known.get(t.id);
      if (stored && stored.queue === queue) return { ok: true, id: t.id, state: stored.state, existed: true };
      if (stored) {
        // Which queue has it stays unsaid: the caller's token may not cover that queue, and
        // a scope hides other queues' tasks (an operator finds it with GetTask).
        return refused(new ConveyorError("ALREADY_EXISTS", "TASK_ID_CONFLICT",
          `task_id ${quote(t.id)} is already used by a task in another queue; choose another id`, "task.task_id"));
      }
      if (claims.ids.has(t.id)) return { ok: true, id: t.id, state: initialState(t, nowMs), existed: true };
    }
    if (t.uniqueKey) {
      const holder = this.unique.holderOf(t.uniqueKey, nowMs);
      if (holder || claims.keys.has(t.uniqueKey)) {
        return refused(new ConveyorError("ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT",
          `unique_key ${quote(t.uniqueKey)} is held by unfinished task ${quote(holder ?? "in this batch")}`,
          "task.unique_key"));
      }
      claims.keys.add(t.uniqueKey);
    }
    if (t.group) {
      const bound = this.groups.typeOf(t.group) ?? claims.groupTypes.get(t.group);
      if (bound !== undefined && bound !== t.type) {
        return refused(new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD",
          `task.type: group ${quote(t.group)} of queue ${quote(queue)} holds tasks of type ${quote(bound)}; a group is single-type, got ${quote(t.type)}`,
          "task.type"));
      }
      claims.groupTypes.set(t.group, t.type);
    }
    // Reserved only once admitted, so a refused item never makes a later duplicate "exist".
    if (t.idChosen) claims.ids.add(t.id);
    return { ok: true, id: t.id, state: initialState(t, nowMs), existed: false };
  }

  /** Stores a new task and applies its rules' strategies; returns its resulting state. */
  private insert(t: NewTask, nowMs: number): TaskState {
    const { ranks } = this.memory;
    const state = initialState(t, nowMs);
    const e = indexEntry(t, {
      state, seq: state === "aggregating" ? ranks.nextSequence() : 0, readyAtMs: Math.max(t.processAtMs, nowMs),
      expiresAtMs: t.expiresAtMs, uniqueUntilMs: t.uniqueKey && t.uniqueTtlMs > 0 ? nowMs + t.uniqueTtlMs : 0,
      payloadBytes: t.payload.byteLength,
    });
    if (state === "pending") e.seq = ranks.rankOf(e);
    this.memory.entries.set(e);
    if (e.uniqueKey) this.unique.hold(e.uniqueKey, e.id, e.uniqueUntilMs);
    this.memory.persist({ kind: "insert", task: t, entry: { ...e }, createdAtMs: nowMs });
    if (t.ruleError) {
      // A rule expression failed: the task fails with that error, never silently keyless.
      this.exits.archive(e, t.ruleError, nowMs);
      return e.state;
    }
    this.rules.join(e);
    this.waiting.schedule(e, nowMs);
    this.rules.applyStrategies(e, (doomed) => this.exits.cancel(doomed, "CONCURRENCY_LIMIT", nowMs));
    return e.state;
  }
}

function initialState(t: NewTask, nowMs: number): TaskState {
  if (t.group !== "") return "aggregating";
  return t.processAtMs > nowMs ? "scheduled" : "pending";
}

const refused = (error: ConveyorError): EnqueueOutcome => ({ ok: false, error });
