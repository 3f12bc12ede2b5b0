/**
 * Schedules in SQLite: the grain's named schedule effects, each one statement, and the
 * reads the grain (load at activation), the operators (ListSchedules) and the node
 * (start-up activation) need. Writes run inside the caller's `Database.write`.
 */
import type { ScheduleEffect } from "../grains/queue/effects.js";
import type { Cadence, MissedTicks, ScheduleState, TaskTemplate } from "../grains/queue/schedule.js";
import type { TaskState } from "../grains/queue/task.js";
import type { Database } from "./database.js";
import { toBuffer } from "./rows.js";

/** A stored schedule with its queue and the state of its last task (absent when none, or purged). */
export interface StoredSchedule extends ScheduleState {
  queue: string;
  lastTaskState?: TaskState;
}

export class ScheduleStore {
  private readonly stmt;

  constructor(db: Database) {
    const s = db.sqlite;
    this.stmt = {
      /** setSchedule: writes the whole row (spec, paused, created_at, updated_at, cursor, last task). */
      set: s.prepare(`INSERT INTO schedules (queue, name, task, payload, cron, time_zone, interval_ms, anchor_at, missed,
          skip_if_running, paused, created_at, updated_at, last_tick_at, last_task_id)
        VALUES (@queue, @name, @task, @payload, @cron, @timeZone, @intervalMs, @anchorAt, @missed, @skipIfRunning, @paused,
          @createdAt, @updatedAt, @lastTickAt, @lastTaskId)
        ON CONFLICT (queue, name) DO UPDATE SET task = @task, payload = @payload, cron = @cron, time_zone = @timeZone,
          interval_ms = @intervalMs, anchor_at = @anchorAt, missed = @missed, skip_if_running = @skipIfRunning, paused = @paused,
          updated_at = @updatedAt, last_tick_at = @lastTickAt, last_task_id = @lastTaskId`),
      /** deleteSchedule: removes the row. */
      delete: s.prepare("DELETE FROM schedules WHERE queue = ? AND name = ?"),
      /** tickSchedule: writes the cursor and the last task. */
      tick: s.prepare("UPDATE schedules SET last_tick_at = ?, last_task_id = ? WHERE queue = ? AND name = ?"),
      load: s.prepare("SELECT * FROM schedules WHERE queue = ? ORDER BY name"),
      listAll: s.prepare(`SELECT s.*, t.state AS last_task_state FROM schedules s LEFT JOIN tasks t ON t.id = s.last_task_id
        ORDER BY s.queue, s.name`),
      listQueue: s.prepare(`SELECT s.*, t.state AS last_task_state FROM schedules s LEFT JOIN tasks t ON t.id = s.last_task_id
        WHERE s.queue = ? ORDER BY s.name`),
      queues: s.prepare("SELECT DISTINCT queue FROM schedules WHERE paused = 0"),
    };
  }

  /** Runs the one statement named by the effect. */
  apply(queue: string, effect: ScheduleEffect): void {
    switch (effect.kind) {
      case "setSchedule":
        this.stmt.set.run(toParams(queue, effect.schedule));
        return;
      case "deleteSchedule":
        this.stmt.delete.run(queue, effect.name);
        return;
      case "tickSchedule":
        this.stmt.tick.run(effect.lastTickAtMs, effect.lastTaskId, queue, effect.name);
        return;
      default: {
        const never: never = effect;
        throw new Error(`unknown schedule effect ${JSON.stringify(never)}`);
      }
    }
  }

  /** A queue's schedules, for its grain's activation. */
  load(queue: string): ScheduleState[] {
    return (this.stmt.load.all(queue) as ScheduleRow[]).map(rowToSchedule);
  }

  /** Every schedule (or one queue's), with its last task's state. */
  list(queue?: string): StoredSchedule[] {
    const rows = (queue === undefined ? this.stmt.listAll.all() : this.stmt.listQueue.all(queue)) as ScheduleRow[];
    return rows.map((r) => ({
      ...rowToSchedule(r), queue: r.queue, ...(r.last_task_state ? { lastTaskState: r.last_task_state } : {}),
    }));
  }

  /** Queues with an unpaused schedule: their grains must run to fire ticks. */
  queuesWithSchedules(): string[] {
    return (this.stmt.queues.all() as Array<{ queue: string }>).map((r) => r.queue);
  }
}

interface ScheduleRow {
  queue: string; name: string; task: string; payload: Buffer; cron: string; time_zone: string; interval_ms: number;
  anchor_at: number; missed: MissedTicks; skip_if_running: number; paused: number; created_at: number; updated_at: number;
  last_tick_at: number; last_task_id: string; last_task_state?: TaskState | null;
}

function toParams(queue: string, s: ScheduleState) {
  const { payload, ...template } = s.task;
  const c = s.cadence;
  return {
    queue, name: s.name, task: JSON.stringify(template), payload: toBuffer(payload),
    cron: c.kind === "cron" ? c.expression : "", timeZone: c.kind === "cron" ? c.timeZone : "",
    intervalMs: c.kind === "interval" ? c.everyMs : 0, anchorAt: c.kind === "interval" ? c.anchorMs : 0,
    missed: s.missed, skipIfRunning: s.skipIfRunning ? 1 : 0, paused: s.paused ? 1 : 0, createdAt: s.createdAtMs,
    updatedAt: s.updatedAtMs, lastTickAt: s.lastTickAtMs, lastTaskId: s.lastTaskId,
  };
}

function rowToSchedule(r: ScheduleRow): ScheduleState {
  const cadence: Cadence = r.cron !== ""
    ? { kind: "cron", expression: r.cron, timeZone: r.time_zone }
    : { kind: "interval", everyMs: r.interval_ms, anchorMs: r.anchor_at };
  const task = { ...(JSON.parse(r.task) as Omit<TaskTemplate, "payload">), payload: new Uint8Array(r.payload) };
  return {
    name: r.name, task, cadence, missed: r.missed, skipIfRunning: r.skip_if_running === 1, paused: r.paused === 1,
    createdAtMs: r.created_at, updatedAtMs: r.updated_at, lastTickAtMs: r.last_tick_at, lastTaskId: r.last_task_id,
  };
}
