/**
 * One log line per failed task attempt: queue, type, id, attempt, error text and what
 * happens next (retry, requeued, archived). Never the payload.
 *
 * The grain's effects already name each failure (a `retry`, `requeue` or failure
 * `archive` transition carries the task's entry and its error), and the grain reports
 * every turn's written effects (`GrainHooks.onApplied`, as for the metrics); so the node
 * logs from that hook rather than the grain learning to log.
 */
import type { Logger } from "pino";
import { LOG_ERROR_TEXT_MAX_BYTES, truncateText } from "../base/limits.js";
import type { Effect } from "../grains/queue/effects.js";

export interface TaskFailure {
  queue: string;
  type: string;
  id: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  /** Retries the task may spend in all. */
  maxRetry: number;
  error: string;
  /** "retry": waits out its backoff; "requeued": its lease lapsed, pending again at once; "archived": no retry left (or past its deadline). */
  next: "retry" | "requeued" | "archived";
}

/** The failed attempts among a turn's effects (an operator's archive is not one: it has no failure time). */
export function taskFailures(queue: string, effects: readonly Effect[]): TaskFailure[] {
  const failures: TaskFailure[] = [];
  for (const effect of effects) {
    if (effect.kind !== "retry" && effect.kind !== "requeue" && effect.kind !== "archive") continue;
    if (effect.kind === "archive" && effect.outcome.lastFailedAtMs === undefined) continue;
    const { entry } = effect;
    failures.push({
      queue, type: entry.type, id: entry.id,
      // A retry or requeue has counted the failure already; an archive spent no retry on it.
      attempt: effect.kind === "archive" ? entry.retried + 1 : entry.retried,
      maxRetry: entry.maxRetry,
      error: truncateText(effect.outcome.lastError, LOG_ERROR_TEXT_MAX_BYTES),
      next: effect.kind === "retry" ? "retry" : effect.kind === "requeue" ? "requeued" : "archived",
    });
  }
  return failures;
}

/** Logs each failed attempt among a turn's written effects. */
export function logTaskFailures(logger: Logger, queue: string, effects: readonly Effect[]): void {
  for (const failure of taskFailures(queue, effects)) {
    const level = failure.next === "archived" ? "error" : "warn";
    logger[level](failure, failure.next === "archived" ? "task failed and was archived" : "task attempt failed");
  }
}
