/**
 * Schedules from the SDK: AdminService's schedule methods with the SDK's shapes (a task
 * from `newTask`, durations as "30s" or ms, instants as Dates). A small class of its own
 * so that the admin API can hand out one (`new Schedules({ channel })`) or re-export it.
 */
import { create } from "@bufbuild/protobuf";
import { ConveyorError } from "../base/errors.js";
import { AdminService, MissedTicks as WireMissed, ScheduleSchema, type Schedule } from "../gen/conveyor/v1/admin_service_pb.js";
import { TaskState as WireState } from "../gen/conveyor/v1/task_pb.js";
import { RpcChannel } from "../rpc/client.js";
import type { UnaryClient } from "../rpc/service-definition.js";
import type { ClientOptions } from "./client.js";
import { connectTo } from "./connection.js";
import { stateName, toSpec, type Duration, type EnqueueOptions, type NewTaskSpec, type TaskState } from "./task.js";
import { parseDurationMs } from "../base/duration.js";

/** The enqueue options a schedule's task may carry (no id, no absolute instants, no unique key). */
export type ScheduleTaskOptions = Pick<EnqueueOptions, "queue" | "priority" | "maxRetry" | "timeout" | "processIn" | "retention"
  | "expiresIn" | "concurrencyKey" | "group" | "backoff">;

/** A cadence (cron in a zone, default UTC; or a fixed interval of at least 1 s) and the policies. */
export type ScheduleOptions = ScheduleTaskOptions & ({ cron: string; timeZone?: string } | { every: Duration }) & {
  /** Ticks missed while the node was down: enqueue the latest one (default) or none. */
  missedTicks?: "latest" | "skip";
  /** Overlap guard: skip a tick while the schedule's previous task is unfinished. */
  skipIfRunning?: boolean;
};

/** A stored schedule as the SDK shows it. */
export interface ScheduleView {
  queue: string;
  name: string;
  type: string;
  payload: Uint8Array;
  contentType: string;
  metadata: Record<string, string>;
  /** Set for a cron schedule. */
  cron?: string;
  /** The cron expression's zone; "" = UTC. */
  timeZone: string;
  /** Set for an interval schedule, in ms. */
  everyMs?: number;
  missedTicks: "latest" | "skip";
  skipIfRunning: boolean;
  paused: boolean;
  /** The tick handled next; undefined when paused. */
  nextTickAt: Date | undefined;
  /** Every tick up to this one was handled (enqueued or skipped). */
  lastTickAt: Date | undefined;
  /** The last task the schedule enqueued ("" = none) and its state (undefined once purged). */
  lastTaskId: string;
  lastTaskState: TaskState | undefined;
  createdAt: Date | undefined;
  updatedAt: Date | undefined;
}

const date = (v: bigint): Date | undefined => (v === 0n ? undefined : new Date(Number(v)));

/** A wire Schedule in the SDK's shape. */
export function toScheduleView(s: Schedule): ScheduleView {
  const t = s.task;
  return {
    queue: t?.queue ?? "", name: s.name, type: t?.type ?? "", payload: t?.payload ?? new Uint8Array(), contentType: t?.contentType ?? "",
    metadata: t?.metadata ?? {},
    ...(s.cadence.case === "cron" ? { cron: s.cadence.value } : {}),
    ...(s.cadence.case === "intervalMs" ? { everyMs: Number(s.cadence.value) } : {}),
    timeZone: s.timeZone, missedTicks: s.missedTicks === WireMissed.SKIP ? "skip" : "latest", skipIfRunning: s.skipIfRunning,
    paused: s.paused, nextTickAt: date(s.nextTickAtMs), lastTickAt: date(s.lastTickAtMs), lastTaskId: s.lastTaskId,
    lastTaskState: s.lastTaskState === WireState.UNSPECIFIED ? undefined : stateName(s.lastTaskState),
    createdAt: date(s.createdAtMs), updatedAt: date(s.updatedAtMs),
  };
}

/** A queue's periodic tasks, through AdminService (see docs/concepts/schedules.md). */
export class Schedules {
  private readonly channel: RpcChannel;
  private readonly owned: boolean;
  private readonly admin: UnaryClient<typeof AdminService>;
  private readonly timeoutMs: number;

  /** Opens its own channel, or uses `channel` (closed by its owner, not here). */
  constructor(options: ClientOptions & { channel?: RpcChannel } = {}) {
    this.owned = options.channel === undefined;
    this.channel = options.channel ?? connectTo(options, "Schedules").channel;
    this.admin = this.channel.service(AdminService);
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  private get call() {
    return { timeoutMs: this.timeoutMs, waitForReady: true };
  }

  /** Creates or replaces the schedule `name` of `options.queue` (default "default"). */
  async set(name: string, task: NewTaskSpec, options: ScheduleOptions): Promise<ScheduleView> {
    let schedule: Schedule;
    try {
      schedule = create(ScheduleSchema, {
        name, task: toSpec(task, options),
        cadence: "cron" in options ? { case: "cron", value: options.cron } : { case: "intervalMs", value: BigInt(durationMs(options.every)) },
        timeZone: "cron" in options ? options.timeZone ?? "" : "",
        missedTicks: options.missedTicks === "skip" ? WireMissed.SKIP : WireMissed.LATEST,
        skipIfRunning: options.skipIfRunning ?? false,
      });
    } catch (e) {
      throw new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", (e as Error).message);
    }
    const res = await this.admin.setSchedule({ schedule }, this.call);
    return toScheduleView(res.schedule!);
  }

  /** Every schedule, or `queue`'s. */
  async list(queue?: string): Promise<ScheduleView[]> {
    const res = await this.admin.listSchedules({ queue: queue ?? "" }, this.call);
    return res.schedules.map(toScheduleView);
  }

  async delete(name: string, queue = ""): Promise<void> {
    await this.admin.deleteSchedule({ queue, name }, this.call);
  }

  async pause(name: string, queue = ""): Promise<ScheduleView> {
    return toScheduleView((await this.admin.pauseSchedule({ queue, name }, this.call)).schedule!);
  }

  async resume(name: string, queue = ""): Promise<ScheduleView> {
    return toScheduleView((await this.admin.resumeSchedule({ queue, name }, this.call)).schedule!);
  }

  /** Enqueues the schedule's task now; resolves with the new task's id. */
  async runNow(name: string, queue = ""): Promise<string> {
    return (await this.admin.runScheduleNow({ queue, name }, this.call)).taskId;
  }

  close(): void {
    if (this.owned) this.channel.close();
  }
}

function durationMs(d: Duration): number {
  return typeof d === "number" ? Math.round(d) : parseDurationMs(d);
}
