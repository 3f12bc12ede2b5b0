/**
 * When each running task of a queue started, so that settling it can report its run
 * time. Fed with the grains' written effects: an activation starts an attempt; a
 * completion, retry or archive of a running task ends it with a run time; a lapse,
 * release, cancel or delete ends it without one (the node did not see it run to an
 * outcome). Memory follows the running tasks; a queue's entries go with its grain (a
 * task running across a grain reload is simply not timed).
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

export class AttemptStarts {
  private readonly byQueue = new Map<string, Map<string, number>>();

  constructor(private readonly observer: AttemptObserver) {}

  apply(queue: string, effects: readonly Effect[], nowMs: number): void {
    for (const e of effects) {
      switch (e.kind) {
        case "activate": {
          let starts = this.byQueue.get(queue);
          if (!starts) this.byQueue.set(queue, (starts = new Map()));
          starts.set(e.entry.id, nowMs);
          this.observer.started(queue, Math.max(0, nowMs - e.entry.readyAtMs));
          break;
        }
        case "complete": this.end(queue, e.entry.id, "completed", nowMs); break;
        case "retry":
          this.observer.retried(queue);
          this.end(queue, e.entry.id, "retry", nowMs);
          break;
        case "archive": this.end(queue, e.entry.id, "archived", nowMs); break;
        case "requeue": case "release": case "cancel": this.end(queue, e.entry.id, undefined, nowMs); break;
        case "delete": this.end(queue, e.id, undefined, nowMs); break;
        default: break;
      }
    }
  }

  /** The queue's grain left memory: its running tasks are no longer followed. */
  forgetQueue(queue: string): void {
    this.byQueue.delete(queue);
  }

  private end(queue: string, taskId: string, end: AttemptEnd | undefined, nowMs: number): void {
    const starts = this.byQueue.get(queue);
    const startedAtMs = starts?.get(taskId);
    if (startedAtMs === undefined) return;
    starts!.delete(taskId);
    if (starts!.size === 0) this.byQueue.delete(queue);
    if (end) this.observer.ended(queue, end, nowMs - startedAtMs);
  }
}
