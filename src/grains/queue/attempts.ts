/**
 * A task's attempt history: each lease of a task from its start to its end, with the
 * worker that held it, how it ended and the error it failed with (River keeps
 * `errors[]`; this keeps whole attempts).
 *
 * Why it is written at the end only: the start, the worker and the attempt's number are
 * already on the task's row (the activation writes them with the lease, no extra write),
 * so an attempt costs one INSERT when it ends (`recordAttempt`), in the same turn as the
 * transition, and the task's row is not rewritten for it. A task keeps its last
 * ATTEMPTS_KEPT_PER_TASK.
 */

/** How an attempt ended; one list (the proto's `Attempt.outcome` documents the same names). */
export const ATTEMPT_OUTCOMES = [
  "succeeded", "failed", "failed_no_retry", "timed_out", "lease_expired", "released", "cancelled",
] as const;

export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** How an attempt ends, as the part ending it knows it. */
export interface AttemptEnding {
  outcome: AttemptOutcome;
  /** Empty when the attempt did not fail. */
  error: string;
  /** The worker's stack trace of the failure; absent when it sent none. */
  stack?: string;
}

/** One stored attempt. */
export interface AttemptRecord {
  /** 1 for the task's first lease; every lease counts. */
  number: number;
  startedAtMs: number;
  endedAtMs: number;
  /** The Lease call's worker id ("" when it named none). */
  workerId: string;
  outcome: AttemptOutcome;
  error: string;
  /** The failure's stack trace as the worker sent it ("" when none). */
  stack: string;
}
