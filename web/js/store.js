// The shared, live picture of the node: the latest ListQueues snapshot. (Activity
// history comes from the node itself: GetActivity.)

import { admin } from "./api.js";
import { STATES, toNum } from "./format.js";

export const POLL_MS = 2_000;

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
    this.listeners = new Set();
  }

  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  queue(name) {
    return this.queues.find((q) => q.name === name);
  }

  /** Fetches ListQueues and tells the listeners; throws what the API throws. */
  async refresh() {
    const res = await admin("ListQueues", {});
    const now = Date.now();
    this.queues = (res.queues ?? []).map(normalizeQueue);
    this.loaded = true;
    this.updatedAt = new Date(now);
    for (const fn of this.listeners) fn(this);
  }
}
