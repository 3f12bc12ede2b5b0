// Overview: every queue with its count per state, and per-minute activity over the
// last hour, which the node keeps (GetActivity), so the chart has history on page load.

import { lineChart } from "../chart.js";
import { h, replaceKeepingFocus, table, uid } from "../dom.js";
import { STATES, count, percent, rate, toNum } from "../format.js";
import { href } from "../router.js";
import { pageHeader, pausedBadge } from "../ui.js";
import { registerTab } from "./registry.js";

/** The cards' window: the last five minutes of the node's per-minute counts. */
const CARD_WINDOW_MIN = 5;
const SERIES = [
  { key: "enqueued", label: "enqueued" },
  { key: "completed", label: "completed" },
  { key: "retried", label: "retried (failed, will run again)" },
  { key: "archived", label: "archived (failed for good)" },
];

/**
 * Failure rate over some buckets: failed attempts (retried or archived) out of every
 * attempt outcome (completed, retried, archived).
 */
export function failureRate(buckets) {
  let completed = 0;
  let failed = 0;
  for (const b of buckets) {
    completed += toNum(b.completed);
    failed += toNum(b.retried) + toNum(b.archived);
  }
  return { completed, failed, outcomes: completed + failed, rate: completed + failed > 0 ? failed / (completed + failed) : null };
}

registerTab({
  id: "overview",
  title: "Overview",
  order: 10,
  mount(container, ctx) {
    const { store, api } = ctx;
    let chartQueue = ctx.route.params.get("chart") ?? "";
    /** GetActivity's buckets for chartQueue, oldest first (the last is the current minute). */
    let activity = { queue: "", buckets: [], bucketMs: 60_000 };

    const cards = h("div", { class: "cards" });
    const selectId = uid("chart-queue");
    const select = h("select", { id: selectId, name: "chart-queue" });
    select.addEventListener("change", () => {
      chartQueue = select.value;
      void refresh();
    });
    const chartBox = h("div", { class: "chart-box" });
    const legend = h("ul", { class: "legend" }, SERIES.map((x) => h("li", { class: x.key }, `${x.label} per minute`)));
    const tableBox = h("div", { class: "queue-table" });

    container.append(
      pageHeader("Overview", "Every queue, live, with the node that owns it (in a cluster, every member's queues). Counts come from the nodes' durable state."),
      cards,
      h("section", { class: "panel", "aria-labelledby": `${selectId}-h` },
        h("div", { class: "panel-head" },
          h("h2", { id: `${selectId}-h` }, "Activity, last hour"),
          h("div", { class: "inline-field" }, h("label", { for: selectId }, "Queue"), select)),
        chartBox, legend,
        h("p", { class: "hint" }, "Per-minute counts kept by the node for the last hour (since it started, if that is sooner); the last point is the current minute so far.")),
      h("section", { class: "panel" }, h("h2", null, "Queues"), tableBox));

    function renderSelect() {
      const names = store.queues.map((q) => q.name);
      // A queue from the link stays chosen until the first snapshot says it does not exist.
      if (chartQueue && store.loaded && !names.includes(chartQueue)) {
        chartQueue = "";
        void refresh();
      }
      const options = ["", ...names];
      if (chartQueue && !names.includes(chartQueue)) options.push(chartQueue);
      const current = [...select.options].map((o) => o.value);
      if (JSON.stringify(current) !== JSON.stringify(options)) {
        select.replaceChildren(...options.map((name) => h("option", { value: name }, name || "All queues")));
      }
      select.value = chartQueue;
    }

    function renderCards() {
      const totals = { pending: 0, active: 0, retry: 0, scheduled: 0 };
      for (const q of store.queues) for (const k of Object.keys(totals)) totals[k] += q.counts[k];
      const paused = store.queues.filter((q) => q.paused).length;
      // The last CARD_WINDOW_MIN minutes, the current one partial: rates over the time covered.
      const recent = activity.buckets.slice(-CARD_WINDOW_MIN);
      const coveredSec = recent.length === 0 ? 0
        : (Date.now() - toNum(recent[0].startMs)) / 1000;
      const failures = failureRate(recent);
      const perSec = coveredSec > 0 ? failures.completed / coveredSec : 0;
      const where = chartQueue ? `queue ${chartQueue}` : "all queues";
      const card = (label, value, note, key) => h("div", { class: "card", dataset: { card: key } },
        h("span", { class: "card-label" }, label), h("span", { class: "card-value" }, value), note ? h("span", { class: "card-note" }, note) : null);
      replaceKeepingFocus(cards,
        card("Queues", count(store.queues.length), paused ? `${paused} paused` : "none paused", "queues"),
        card("Pending", count(totals.pending), `${count(totals.scheduled)} scheduled, ${count(totals.retry)} in retry`, "pending"),
        card("Active", count(totals.active), "leased by workers", "active"),
        card("Completed / s", rate(perSec), `${where}, last ${CARD_WINDOW_MIN} min`, "throughput"),
        card("Failure rate", failures.rate === null ? "—" : percent(failures.rate),
          `${count(failures.failed)} failed attempts (retried or archived) of ${count(failures.outcomes)}, last ${CARD_WINDOW_MIN} min`, "failures"));
    }

    function renderChart() {
      const { buckets, bucketMs } = activity;
      const now = Date.now();
      // Each minute's count is drawn at the minute's end; the current minute's at now.
      const points = (key) => buckets.map((b) => ({ t: Math.min(now, toNum(b.startMs) + bucketMs), v: toNum(b[key]) }));
      const last = buckets.at(-1);
      const label = `Activity of ${chartQueue || "all queues"} per minute over the last hour; this minute so far: `
        + SERIES.map((x) => `${count(last?.[x.key] ?? 0)} ${x.key}`).join(", ");
      const from = buckets.length ? toNum(buckets[0].startMs) : now - 60 * 60_000;
      chartBox.replaceChildren(lineChart({
        from, to: now, label, unit: "/min", width: chartBox.clientWidth || 720, height: chartBox.clientWidth < 500 ? 180 : 220,
        series: SERIES.map((x) => ({ name: x.key, className: x.key, points: points(x.key) })),
      }));
      if (buckets.length === 0) chartBox.append(h("p", { class: "chart-empty" }, "Loading…"));
    }

    function renderTable() {
      if (!store.loaded) {
        tableBox.replaceChildren(h("p", { class: "empty" }, "Loading…"));
        return;
      }
      if (store.queues.length === 0) {
        tableBox.replaceChildren(h("p", { class: "empty" },
          "No queues yet. Enqueue a task (", h("code", null, "conveyor enqueue --type demo"), ") and it appears here."));
        return;
      }
      const rows = store.queues.map((q) => h("tr", { dataset: { queue: q.name } },
        h("th", { scope: "row" }, h("a", { href: href(["tasks"], { queue: q.name }), "data-focus-key": `q:${q.name}` }, q.name)),
        h("td", null, pausedBadge(q.paused)),
        STATES.map((state) => h("td", { class: "num", dataset: { state } },
          q.counts[state] > 0
            ? h("a", { href: href(["tasks"], { queue: q.name, state }), "data-focus-key": `q:${q.name}:${state}`, "aria-label": `${count(q.counts[state])} ${state} in ${q.name}` }, count(q.counts[state]))
            : h("span", { class: "zero" }, "0"))),
        h("td", { class: "num" }, q.concurrencyLimit ? String(q.concurrencyLimit) : "—"),
        h("td", { class: "mono", dataset: { col: "owner" } }, q.owner || "—")));
      replaceKeepingFocus(tableBox, table({
        caption: "Queues with their task counts per state",
        className: "data counts",
        head: ["Queue", "Status", ...STATES.map((s) => ({ text: s, class: "num" })), { text: "Key limit", class: "num" }, "Owner"],
        rows,
      }));
    }

    function render() {
      renderSelect();
      renderCards();
      renderChart();
      renderTable();
    }

    /** Fetches the chart queue's activity (60 small buckets), then draws everything. */
    async function refresh() {
      const queue = chartQueue;
      try {
        const res = await api.admin("GetActivity", { queue });
        if (queue === chartQueue) activity = { queue, buckets: res.buckets ?? [], bucketMs: toNum(res.bucketMs) || 60_000 };
      } catch {
        // The banner reports an unreachable node; the chart keeps what it had.
      }
      render();
    }

    const onResize = () => renderChart();
    window.addEventListener("resize", onResize);
    render();
    void refresh();
    return { refresh, unmount: () => window.removeEventListener("resize", onResize) };
  },
});
