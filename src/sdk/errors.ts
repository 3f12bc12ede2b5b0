/** Control-flow errors for handlers, and the errors of waiting for a task. */
import type { TaskState, TaskView } from "./task.js";

const SKIP_RETRY = Symbol.for("conveyor.skipRetry");

/** Wraps an error so the task is archived at once instead of retried. */
export function skipRetry(err: unknown): Error {
  const error = err instanceof Error ? err : new Error(String(err));
  (error as unknown as Record<symbol, boolean>)[SKIP_RETRY] = true;
  return error;
}

export function isSkipRetry(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as Record<symbol, unknown>)[SKIP_RETRY] === true;
}

/**
 * Thrown by a batch handler to give members their own outcome: members named in
 * `errors` (by task id) fail: archived when the error is wrapped with `skipRetry`,
 * retried otherwise. Members not named complete.
 */
export class BatchError extends Error {
  override readonly name = "BatchError";
  readonly errors: ReadonlyMap<string, unknown>;

  constructor(errors: ReadonlyMap<string, unknown> | Record<string, unknown>, message = "some batch members failed") {
    super(message);
    this.errors = errors instanceof Map ? errors : new Map(Object.entries(errors));
  }
}

/**
 * `client.waitForResult`: the task ended without completing (archived after its
 * retries, or cancelled). `task` is the task as it ended; its `lastError` says why.
 */
export class TaskFailedError extends Error {
  override readonly name = "TaskFailedError";
  constructor(readonly task: TaskView) {
    super(`task ${task.id} ${task.state === "cancelled" ? `was cancelled${task.cancelReason ? ` (${task.cancelReason})` : ""}` : "was archived"}`
      + (task.lastError ? `: ${task.lastError}` : ""));
  }
}

/** `client.waitForResult`: the task had not finished when the wait's timeout passed. */
export class WaitTimeoutError extends Error {
  override readonly name = "WaitTimeoutError";
  constructor(readonly taskId: string, readonly timeoutMs: number, readonly state: TaskState) {
    super(`task ${taskId} did not finish within ${timeoutMs} ms (it is ${state})`);
  }
}

export { ConveyorError } from "../base/errors.js";
