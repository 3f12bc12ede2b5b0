/**
 * Per-minute counts of what happened on this node over the last hour (enqueued,
 * completed, retried, archived), node-wide and per queue, so the dashboard can draw
 * charts with history as soon as it opens. Memory only: a restart starts empty.
 *
 * A ring of ACTIVITY_MINUTES one-minute buckets per queue; a bucket is reused when its
 * minute comes round again. A queue with no activity for the whole window is dropped,
 * so the map holds only the queues that were busy within the hour.
 */
import { ACTIVITY_MINUTES } from "../base/limits.js";

export const ACTIVITY_KINDS = ["enqueued", "completed", "retried", "archived"] as const;
export type ActivityKind = (typeof ACTIVITY_KINDS)[number];

/** Bucket width. */
export const ACTIVITY_BUCKET_MS = 60_000;
const MINUTE_MS = ACTIVITY_BUCKET_MS;
const KIND_INDEX: Record<ActivityKind, number> = { enqueued: 0, completed: 1, retried: 2, archived: 3 };

export interface ActivityBucket {
  startMs: number;
  enqueued: number;
  completed: number;
  retried: number;
  archived: number;
}

class Ring {
  /** The minute (ms / 60 000) each slot counts, or -1 when unused. */
  private readonly minutes = new Array<number>(ACTIVITY_MINUTES).fill(-1);
  private readonly counts = Array.from({ length: ACTIVITY_MINUTES }, () => [0, 0, 0, 0]);
  lastMinute = -1;

  add(minute: number, kind: number, n: number): void {
    const slot = minute % ACTIVITY_MINUTES;
    if (this.minutes[slot] !== minute) {
      this.minutes[slot] = minute;
      this.counts[slot]!.fill(0);
    }
    this.counts[slot]![kind]! += n;
    this.lastMinute = Math.max(this.lastMinute, minute);
  }

  /** The count of `kind` in `minute`, 0 when the slot holds another minute. */
  get(minute: number, kind: number): number {
    const slot = minute % ACTIVITY_MINUTES;
    return this.minutes[slot] === minute ? this.counts[slot]![kind]! : 0;
  }
}

export class ActivityHistory {
  private readonly all = new Ring();
  private readonly byQueue = new Map<string, Ring>();
  private prunedMinute = -1;

  constructor(private readonly nowMs: () => number) {}

  add(queue: string, kind: ActivityKind, n = 1): void {
    if (n <= 0) return;
    const minute = Math.floor(this.nowMs() / MINUTE_MS);
    let ring = this.byQueue.get(queue);
    if (!ring) {
      if (minute !== this.prunedMinute) this.prune(minute);
      this.byQueue.set(queue, (ring = new Ring()));
    }
    ring.add(minute, KIND_INDEX[kind], n);
    this.all.add(minute, KIND_INDEX[kind], n);
  }

  /** The last ACTIVITY_MINUTES minutes, oldest first, the current (partial) minute last; "" = every queue. */
  series(queue: string): ActivityBucket[] {
    const now = Math.floor(this.nowMs() / MINUTE_MS);
    const ring = queue === "" ? this.all : this.byQueue.get(queue);
    const out: ActivityBucket[] = [];
    for (let minute = now - ACTIVITY_MINUTES + 1; minute <= now; minute++) {
      const at = (kind: ActivityKind) => ring?.get(minute, KIND_INDEX[kind]) ?? 0;
      out.push({ startMs: minute * MINUTE_MS, enqueued: at("enqueued"), completed: at("completed"), retried: at("retried"), archived: at("archived") });
    }
    return out;
  }

  get queueCount(): number {
    return this.byQueue.size;
  }

  /** Drops queues quiet for the whole window (when a new queue appears, at most once a minute). */
  private prune(minute: number): void {
    this.prunedMinute = minute;
    for (const [queue, ring] of this.byQueue) if (ring.lastMinute <= minute - ACTIVITY_MINUTES) this.byQueue.delete(queue);
  }
}
