/**
 * Wait and run times of attempts, read from a grain turn's written effects; nothing is
 * remembered between turns. An activation is a start, `readyAtMs` after the task became
 * ready. An attempt's end is recorded in the same turn as the transition it causes
 * (`recordAttempt`, with its durable start: the attempt history), so the run time is
 * `endedAtMs - startedAtMs`, labelled by that transition: a `complete`, `retry` or
 * `archive` of the task in the turn. A lapse, release or cancel ends an attempt without a
 * run time (the node did not see it run to an outcome).
 */
import type { Effect } from "../grains/queue/effects.js";

export type AttemptEnd = "completed" | "retry" | "archived";

export interface AttemptObserver {
  /** A task started, `waitMs` after it became ready. */
  started(queue: string, waitMs: number): void;
  /** A running task's attempt ended after `runMs`. */
  ended(queue: string, end: AttemptEnd, runMs: number): void;
  /** A failed attempt scheduled a retry. */
  retried(queue: string): void;
}

const END_OF: Partial<Record<Effect["kind"], AttemptEnd>> = { complete: "completed", retry: "retry", archive: "archived" };

export class AttemptTiming {
  constructor(private readonly observer: AttemptObserver) {}

  apply(queue: string, effects: readonly Effect[], nowMs: number): void {
    // Run times of the attempts this turn ended, by task: their transition follows.
    let runMsOf: Map<string, number> | undefined;
    for (const e of effects) {
      if (e.kind === "activate") {
        this.observer.started(queue, Math.max(0, nowMs - e.entry.readyAtMs));
      } else if (e.kind === "recordAttempt") {
        if (e.startedAtMs > 0) (runMsOf ??= new Map()).set(e.taskId, Math.max(0, e.endedAtMs - e.startedAtMs));
      } else if (e.kind === "complete" || e.kind === "retry" || e.kind === "archive") {
        if (e.kind === "retry") this.observer.retried(queue);
        const runMs = runMsOf?.get(e.entry.id);
        if (runMs !== undefined) this.observer.ended(queue, END_OF[e.kind]!, runMs);
      }
    }
  }
}
