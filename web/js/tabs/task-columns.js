// The task list's columns for the state being browsed: what an operator needs to see of
// a task in that state (when a retry runs next, who runs an active task and for how long,
// when a finished one finished), instead of one fixed set for all states.

import { h } from "../dom.js";
import { duration, relative, stateName, timestamp, toNum } from "../format.js";

const when = (ms, now) => (toNum(ms) ? [timestamp(ms), h("span", { class: "muted" }, ` (${relative(ms, now)})`)] : "—");
const errorCell = (t) => (t.lastError ? truncate(t.lastError, 80) : "");

function truncate(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** One column: its header, its data-col name, and its cell for a task. */
const COLUMNS = {
  runsAt: { head: "Runs at", col: "runs-at", cell: (t, now) => when(t.readyAtMs, now) },
  nextRetry: { head: "Next retry", col: "next-retry", cell: (t, now) => when(t.readyAtMs, now) },
  readySince: { head: "Ready since", col: "ready-since", cell: (t, now) => when(t.readyAtMs, now) },
  worker: { head: "Worker", col: "worker", cls: "mono", cell: (t) => t.leaseWorkerId || "—" },
  started: { head: "Started", col: "started", cell: (t, now) => when(t.leasedAtMs, now) },
  runningFor: { head: "Running for", col: "running-for", cls: "num", cell: (t, now) => (toNum(t.leasedAtMs) ? duration(Math.max(0, now - toNum(t.leasedAtMs))) : "—") },
  finished: { head: "Finished", col: "finished", cell: (t, now) => when(t.finishedAtMs, now) },
  cancelReason: { head: "Reason", col: "cancel-reason", cell: (t) => t.cancelReason || "—" },
  created: { head: "Created", col: "created", cell: (t, now) => when(t.createdAtMs, now) },
  group: { head: "Group", col: "group", cls: "mono", cell: (t) => t.group || "—" },
  key: { head: "Concurrency key", col: "key", cls: "mono", cell: (t) => t.concurrencyKey || "—" },
  lastError: { head: "Last error", col: "last-error", cls: "error-text", cell: errorCell },
  when: { head: "When", col: "when", cell: (t, now) => whenForState(t, now) },
};

/** Browsing every state: each row says what its time means. */
function whenForState(t, now) {
  const state = stateName(t.state);
  switch (state) {
    case "scheduled": return ["runs ", when(t.readyAtMs, now)];
    case "retry": return ["retries ", when(t.readyAtMs, now)];
    case "pending": return ["ready since ", when(t.readyAtMs, now)];
    case "active": return toNum(t.leasedAtMs) ? ["started ", when(t.leasedAtMs, now)] : "running";
    case "aggregating": return ["created ", when(t.createdAtMs, now)];
    default: return ["finished ", when(t.finishedAtMs, now)];
  }
}

const BY_STATE = {
  scheduled: ["runsAt", "created"],
  retry: ["nextRetry", "lastError"],
  pending: ["readySince"],
  aggregating: ["group", "created"],
  active: ["worker", "started", "runningFor"],
  completed: ["finished"],
  archived: ["finished", "lastError"],
  cancelled: ["finished", "cancelReason"],
  "": ["when", "lastError"],
};

/**
 * The state-specific columns for `state` ("" = all states), plus a group and a
 * concurrency-key column when any task shown has one.
 */
export function columnsFor(state, tasks) {
  const names = [...(BY_STATE[state] ?? BY_STATE[""])];
  if (!names.includes("group") && tasks.some((t) => t.group)) names.push("group");
  if (tasks.some((t) => t.concurrencyKey)) names.push("key");
  return names.map((n) => COLUMNS[n]);
}

export function columnHead(c) {
  return c.cls === "num" ? { text: c.head, class: "num" } : c.head;
}

export function columnCell(c, t, now) {
  return h("td", { class: c.cls, dataset: { col: c.col } }, c.cell(t, now));
}
