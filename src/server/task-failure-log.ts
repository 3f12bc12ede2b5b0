/**
 * One log line per failed task attempt: queue, type, id, attempt, error text and what
 * happens next (retry, requeued, archived). Never the payload.
 *
 * The grain's effects already name each failure (a `retry`, `requeue` or failure
 * `archive` transition carries the task's entry and its error), and every effect passes
 * through the QueueStore port; so the node wraps its store rather than the grain learning
 * to log. Lines are written once the turn's effects were applied.
 */
import type { Logger } from "pino";
import { LOG_ERROR_TEXT_MAX_BYTES, truncateText } from "../base/limits.js";
import type { Effect } from "../grains/queue/effects.js";
import type { QueueStore } from "../grains/queue/ports.js";

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

/** `store`, logging each failed attempt its effects record. */
export class FailureLoggingStore implements QueueStore {
  constructor(private readonly store: QueueStore, private readonly logger: Logger) {}

  apply(queue: string, effects: readonly Effect[]): ReturnType<QueueStore["apply"]> {
    const activated = this.store.apply(queue, effects);
    for (const failure of taskFailures(queue, effects)) {
      const level = failure.next === "archived" ? "error" : "warn";
      this.logger[level](failure, failure.next === "archived" ? "task failed and was archived" : "task attempt failed");
    }
    return activated;
  }

  loadUnfinished: QueueStore["loadUnfinished"] = (queue) => this.store.loadUnfinished(queue);
  loadSettings: QueueStore["loadSettings"] = (queue) => this.store.loadSettings(queue);
  findIds: QueueStore["findIds"] = (ids) => this.store.findIds(ids);
  getTask: QueueStore["getTask"] = (id) => this.store.getTask(id);
  queueExists: QueueStore["queueExists"] = (queue) => this.store.queueExists(queue);
  hasTasks: QueueStore["hasTasks"] = (queue) => this.store.hasTasks(queue);
  pageOfState: QueueStore["pageOfState"] = (queue, state, afterRowid, limit) => this.store.pageOfState(queue, state, afterRowid, limit);
}
