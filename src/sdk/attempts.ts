/**
 * A task's attempt history as the SDK shows it: `getTask` answers with the task and its
 * last attempts (the node keeps 25), instants as Dates, so a caller can see why each try
 * ended without reading the node's log.
 */
import type { Attempt } from "../gen/conveyor/v1/task_pb.js";
import { toTaskView, type TaskView } from "./task.js";
import type { Task } from "../gen/conveyor/v1/task_pb.js";

/** How an attempt ended, as the node records it; a newer node's outcome comes through as its own string. */
export type AttemptOutcome =
  | "succeeded" | "failed" | "failed_no_retry" | "timed_out" | "lease_expired" | "released" | "cancelled" | (string & {});

export interface AttemptView {
  /** 1 for the task's first lease, counting every lease (a released one too). */
  number: number;
  startedAt: Date | undefined;
  /** Undefined while the attempt runs. */
  endedAt: Date | undefined;
  /** The worker that ran it ("" when its Lease call named none). */
  workerId: string;
  /** "" while the attempt runs. */
  outcome: AttemptOutcome;
  /** The error it failed with ("" when it did not fail). */
  error: string;
  /** Where the error came from: the stack trace (and first lines of its causes) the worker sent; "" when none. */
  stack: string;
}

/** `getTask`'s answer: the task, and its attempts oldest first (at most the last 25). */
export interface TaskDetail extends TaskView {
  attempts: AttemptView[];
}

const date = (v: bigint): Date | undefined => (v === 0n ? undefined : new Date(Number(v)));

export function toAttemptView(a: Attempt): AttemptView {
  return { number: a.number, startedAt: date(a.startedAtMs), endedAt: date(a.endedAtMs), workerId: a.workerId, outcome: a.outcome, error: a.error, stack: a.stack };
}

export function toTaskDetail(res: { task?: Task | undefined; attempts: readonly Attempt[] }): TaskDetail {
  return Object.assign(toTaskView(res.task!), { attempts: res.attempts.map(toAttemptView) });
}
