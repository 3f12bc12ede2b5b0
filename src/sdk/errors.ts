/** Control-flow errors for handlers. */

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

export { ConveyorError } from "../base/errors.js";
