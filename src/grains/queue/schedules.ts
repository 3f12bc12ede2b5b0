/**
 * Periodic tasks: the queue's schedules, and enqueueing each tick's task.
 *
 * Why in the grain: a schedule is a setting of its queue with one writer (the grain), and
 * firing a tick is an enqueue, which the grain's admission already makes idempotent. The
 * tick's task and the schedule's cursor (`lastTickAtMs`) are written in the same turn,
 * hence the same transaction, so a crash leaves both or neither; and the task's id is
 * derived from (schedule, tick), so even a cursor that fell behind (a relocation, a
 * restored backup) meets "already exists" instead of a second task.
 *
 * Time: the grain's timer (and, while it is passivated, the host's reminder) wakes it at
 * the soonest upcoming tick; `fire` then handles, per schedule, only the *latest* due tick
 * (`latestDueTick`: after the cursor, at or before now). Older due ticks were missed (the node was down): they are never
 * enqueued, which is the whole of the "latest" policy; under "skip", the latest is also
 * dropped when it is more than MISSED_TICK_GRACE_MS late.
 *
 * Invariant: every tick at or before a schedule's cursor has been handled, and each
 * tick is enqueued at most once; `soonestMs` is the minimum of `upcoming` over unpaused
 * schedules.
 */
import { ConveyorError } from "../../base/errors.js";
import { SCHEDULES_PER_QUEUE_MAX, quote } from "../../base/limits.js";
import type { Admission, KnownIds } from "./admission.js";
import type { CoreMemory } from "./core-memory.js";
import {
  latestDueTick, runNowTaskId, tickTaskId, upcomingTick, type Cadence, type CronCalendar, type ScheduleSpec, type ScheduleState,
} from "./schedule.js";
import type { NewTask } from "./task.js";

/** A tick handled this much later than its instant counts as missed (the "skip" policy drops it). */
export const MISSED_TICK_GRACE_MS = 5_000;

/** An operator's command on one schedule of the queue. */
export type ScheduleCommand =
  | { kind: "set"; spec: ScheduleSpec }
  | { kind: "delete"; name: string }
  | { kind: "pause"; name: string }
  | { kind: "resume"; name: string }
  | { kind: "runNow"; name: string };

/** The schedule after the command (absent after a delete); `taskId` for runNow. */
export interface ScheduleAnswer {
  schedule?: ScheduleState;
  taskId?: string;
}

/** NOT_FOUND for a schedule name the queue does not hold. */
export const scheduleNotFound = (queue: string, name: string) =>
  new ConveyorError("NOT_FOUND", "SCHEDULE_NOT_FOUND", `queue ${quote(queue)} has no schedule ${quote(name)}`);

/** The part: the queue's schedules by name, their upcoming ticks and the soonest of them. */
export class Schedules {
  private readonly byName = new Map<string, ScheduleState>();
  /** The upcoming tick of each unpaused schedule (see `upcomingTick`). */
  private readonly upcoming = new Map<string, number>();
  private soonestMs: number | undefined;

  constructor(
    private readonly memory: CoreMemory,
    private readonly admission: Admission,
    private readonly cron: CronCalendar,
  ) {}

  /** Restores the stored schedules at load (no effects: they are stored). */
  restore(schedules: readonly ScheduleState[], nowMs: number): void {
    for (const s of schedules) this.byName.set(s.name, { ...s });
    this.replan(nowMs);
  }

  /** The queue's schedules, copies, by name. */
  list(): ScheduleState[] {
    return [...this.byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((s) => ({ ...s }));
  }

  /** When the grain must next run for a tick; undefined without unpaused schedules. */
  get nextAtMs(): number | undefined {
    return this.soonestMs;
  }

  /** Runs an operator's command; the error for an unknown name or a full queue. */
  command(cmd: ScheduleCommand, nowMs: number, known: KnownIds): ScheduleAnswer | ConveyorError {
    if (cmd.kind === "set") return this.set(cmd.spec, nowMs);
    const s = this.byName.get(cmd.name);
    if (!s) return scheduleNotFound(this.memory.queue, cmd.name);
    switch (cmd.kind) {
      case "delete":
        this.byName.delete(s.name);
        this.memory.persist({ kind: "deleteSchedule", name: s.name });
        this.replan(nowMs);
        return {};
      case "pause":
      case "resume":
        return { schedule: this.setPaused(s, cmd.kind === "pause", nowMs) };
      case "runNow": {
        const taskId = runNowTaskId(s.name, nowMs);
        const error = this.enqueue(s, taskId, 0, nowMs, known);
        if (error) return error;
        this.store(s, { lastTaskId: taskId });
        return { schedule: { ...s }, taskId };
      }
    }
  }

  /** Deletes every schedule of the queue (the queue is being removed). */
  clear(): void {
    for (const name of this.byName.keys()) this.memory.persist({ kind: "deleteSchedule", name });
    this.byName.clear();
    this.upcoming.clear();
    this.soonestMs = undefined;
  }

  /** Ids of the tasks `fire(nowMs)` may enqueue (the shell looks up those that finished). */
  dueTaskIds(nowMs: number): string[] {
    if (this.soonestMs === undefined || this.soonestMs > nowMs) return [];
    const ids: string[] = [];
    for (const [name, atMs] of this.upcoming) {
      const tickMs = atMs <= nowMs ? this.latestDue(name, nowMs) : undefined;
      if (tickMs !== undefined) ids.push(tickTaskId(name, tickMs));
    }
    return ids;
  }

  /** Handles the latest due tick of every unpaused schedule (see the header). */
  fire(nowMs: number, known: KnownIds): void {
    if (this.soonestMs === undefined || this.soonestMs > nowMs) return;
    for (const [name, atMs] of this.upcoming) {
      if (atMs > nowMs) continue;
      const s = this.byName.get(name)!;
      const tickMs = this.latestDue(name, nowMs);
      if (tickMs !== undefined) this.handleTick(s, tickMs, nowMs, known);
    }
    this.replan(nowMs);
  }

  private latestDue(name: string, nowMs: number): number | undefined {
    const s = this.byName.get(name)!;
    return latestDueTick(s.cadence, s.lastTickAtMs, nowMs, this.cron);
  }

  private handleTick(s: ScheduleState, tickMs: number, nowMs: number, known: KnownIds): void {
    if (s.missed === "skip" && nowMs - tickMs > MISSED_TICK_GRACE_MS) {
      this.memory.report({ kind: "schedule_tick", outcome: "missed" });
      this.store(s, { lastTickAtMs: tickMs });
      return;
    }
    if (s.skipIfRunning && s.lastTaskId !== "" && this.memory.entries.has(s.lastTaskId)) {
      this.memory.report({ kind: "schedule_tick", outcome: "running" });
      this.store(s, { lastTickAtMs: tickMs });
      return;
    }
    const taskId = tickTaskId(s.name, tickMs);
    const refused = this.enqueue(s, taskId, tickMs, nowMs, known);
    this.memory.report({ kind: "schedule_tick", outcome: refused ? "refused" : "enqueued" });
    this.store(s, refused ? { lastTickAtMs: tickMs } : { lastTickAtMs: tickMs, lastTaskId: taskId });
  }

  /** Admits the schedule's task under `taskId`; the admission's error when it refuses it. */
  private enqueue(s: ScheduleState, taskId: string, tickMs: number, nowMs: number, known: KnownIds): ConveyorError | undefined {
    const { processInMs, expiresInMs, ...template } = s.task;
    const task: NewTask = {
      ...template, id: taskId, idChosen: true, queue: this.memory.queue,
      processAtMs: processInMs > 0 ? Math.max(tickMs, nowMs) + processInMs : 0,
      expiresAtMs: expiresInMs > 0 ? nowMs + expiresInMs : 0,
      deadlineAtMs: 0, uniqueKey: "", uniqueTtlMs: 0,
    };
    const [outcome] = this.admission.enqueue([task], known, nowMs, false);
    return outcome && !outcome.ok ? outcome.error : undefined;
  }

  private set(spec: ScheduleSpec, nowMs: number): ScheduleAnswer | ConveyorError {
    const old = this.byName.get(spec.name);
    if (!old && this.byName.size >= SCHEDULES_PER_QUEUE_MAX) {
      return new ConveyorError("RESOURCE_EXHAUSTED", "SCHEDULES_FULL",
        `queue ${quote(this.memory.queue)} has ${this.byName.size} schedules; the limit is ${SCHEDULES_PER_QUEUE_MAX}`);
    }
    // Ticks from now on: a new or changed cadence never fires for the past.
    // An interval counts from when it was set (the grain's clock); an unchanged one keeps its
    // anchor, so replacing the task does not shift the ticks.
    const cadence = spec.cadence.kind === "cron" ? spec.cadence
      : old && sameInterval(old.cadence, spec.cadence) ? old.cadence : { ...spec.cadence, anchorMs: nowMs };
    const s: ScheduleState = {
      ...spec, cadence, paused: old?.paused ?? false, createdAtMs: old?.createdAtMs ?? nowMs, updatedAtMs: nowMs,
      lastTickAtMs: Math.max(old?.lastTickAtMs ?? 0, nowMs), lastTaskId: old?.lastTaskId ?? "",
    };
    this.byName.set(s.name, s);
    this.memory.persist({ kind: "setSchedule", schedule: { ...s } });
    this.replan(nowMs);
    return { schedule: { ...s } };
  }

  private setPaused(s: ScheduleState, paused: boolean, nowMs: number): ScheduleState {
    if (s.paused !== paused) {
      s.paused = paused;
      s.updatedAtMs = nowMs;
      // Ticks while paused were not missed: resuming starts from now.
      if (!paused) s.lastTickAtMs = Math.max(s.lastTickAtMs, nowMs);
      this.memory.persist({ kind: "setSchedule", schedule: { ...s } });
      this.replan(nowMs);
    }
    return { ...s };
  }

  /** Moves the cursor or the last task and persists it. */
  private store(s: ScheduleState, change: Partial<Pick<ScheduleState, "lastTickAtMs" | "lastTaskId">>): void {
    Object.assign(s, change);
    this.memory.persist({ kind: "tickSchedule", name: s.name, lastTickAtMs: s.lastTickAtMs, lastTaskId: s.lastTaskId });
  }

  /** Recomputes every unpaused schedule's upcoming tick and the soonest of them. */
  private replan(nowMs: number): void {
    this.upcoming.clear();
    let soonest: number | undefined;
    for (const s of this.byName.values()) {
      if (s.paused) continue;
      const atMs = upcomingTick(s, nowMs, this.cron);
      if (atMs === undefined) continue;
      this.upcoming.set(s.name, atMs);
      if (soonest === undefined || atMs < soonest) soonest = atMs;
    }
    this.soonestMs = soonest;
  }
}

function sameInterval(a: Cadence, b: Cadence): boolean {
  return a.kind === "interval" && b.kind === "interval" && a.everyMs === b.everyMs;
}
