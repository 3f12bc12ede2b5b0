// The shared, live picture of the node: the latest ListQueues snapshot and a short
// in-memory history of completed/archived counts for throughput charts.

import { admin } from "./api.js";
import { STATES, toNum } from "./format.js";

export const POLL_MS = 2_000;
export const HISTORY_MS = 5 * 60_000;
/** A gap between samples longer than this breaks the chart line (node unreachable). */
const GAP_MS = 3 * POLL_MS + 1_000;

function normalizeQueue(q) {
  const counts = {};
  for (const s of STATES) counts[s] = toNum(q.counts?.[s]);
  return {
    name: q.name ?? "",
    paused: Boolean(q.paused),
    owner: q.owner ?? "",
    concurrencyLimit: toNum(q.concurrencyLimit),
    counts,
  };
}

export class NodeStore {
  constructor() {
    /** @type {ReturnType<typeof normalizeQueue>[]} */
    this.queues = [];
    this.loaded = false;
    this.updatedAt = null;
    /** [{ t, counts: Map<queue, { completed, archived }> }] */
    this.samples = [];
    this.listeners = new Set();
  }

  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  queue(name) {
    return this.queues.find((q) => q.name === name);
  }

  /** Fetches ListQueues and records a sample; throws what the API throws. */
  async refresh() {
    const res = await admin("ListQueues", {});
    const now = Date.now();
    this.queues = (res.queues ?? []).map(normalizeQueue);
    this.loaded = true;
    this.updatedAt = new Date(now);
    const counts = new Map(this.queues.map((q) => [q.name, { completed: q.counts.completed, archived: q.counts.archived }]));
    this.samples.push({ t: now, counts });
    while (this.samples.length > 2 && this.samples[1].t < now - HISTORY_MS) this.samples.shift();
    for (const fn of this.listeners) fn(this);
  }

  /**
   * Per-second completion and archive rates between successive samples, for one queue
   * or (queue = "") all of them. Counts that drop (retention purge, delete) count as 0.
   * A point is null across a gap in sampling.
   */
  series(queue = "") {
    const completed = [];
    const archived = [];
    for (let i = 1; i < this.samples.length; i++) {
      const a = this.samples[i - 1];
      const b = this.samples[i];
      const dt = (b.t - a.t) / 1000;
      if (b.t - a.t > GAP_MS || dt <= 0) {
        completed.push({ t: b.t, v: null });
        archived.push({ t: b.t, v: null });
        continue;
      }
      let dc = 0;
      let da = 0;
      for (const [name, now] of b.counts) {
        if (queue && name !== queue) continue;
        // A queue missing from the previous snapshot had no tasks at all then.
        const before = a.counts.get(name) ?? { completed: 0, archived: 0 };
        dc += Math.max(0, now.completed - before.completed);
        da += Math.max(0, now.archived - before.archived);
      }
      completed.push({ t: b.t, v: dc / dt });
      archived.push({ t: b.t, v: da / dt });
    }
    return { completed, archived };
  }

  /** Totals over the last `windowMs`: finished tasks, archived tasks and seconds covered. */
  totals(queue = "", windowMs = 60_000) {
    const { completed, archived } = this.series(queue);
    const since = Date.now() - windowMs;
    let c = 0;
    let a = 0;
    let seconds = 0;
    for (let i = 0; i < completed.length; i++) {
      const p = completed[i];
      if (p.t < since || p.v === null) continue;
      const prev = this.samples[i].t;
      const dt = (p.t - prev) / 1000;
      c += p.v * dt;
      a += archived[i].v * dt;
      seconds += dt;
    }
    return { completed: Math.round(c), archived: Math.round(a), seconds };
  }
}
