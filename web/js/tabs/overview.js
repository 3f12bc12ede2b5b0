// Overview: every queue with its count per state, and throughput / failures over the
// last minutes (computed here from successive ListQueues snapshots).

import { lineChart } from "../chart.js";
import { h, replaceKeepingFocus, table, uid } from "../dom.js";
import { STATES, count, percent, rate } from "../format.js";
import { href } from "../router.js";
import { HISTORY_MS } from "../store.js";
import { pageHeader, pausedBadge } from "../ui.js";
import { registerTab } from "./registry.js";

registerTab({
  id: "overview",
  title: "Overview",
  order: 10,
  mount(container, ctx) {
    const { store } = ctx;
    let chartQueue = ctx.route.params.get("chart") ?? "";

    const cards = h("div", { class: "cards" });
    const selectId = uid("chart-queue");
    const select = h("select", { id: selectId, name: "chart-queue" });
    select.addEventListener("change", () => {
      chartQueue = select.value;
      render();
    });
    const chartBox = h("div", { class: "chart-box" });
    const legend = h("ul", { class: "legend" },
      h("li", { class: "completed" }, "completed per second"),
      h("li", { class: "archived" }, "archived (failed) per second"));
    const tableBox = h("div", { class: "queue-table" });

    container.append(
      pageHeader("Overview", "Every queue on this node, live. Counts come from the node's durable state."),
      cards,
      h("section", { class: "panel", "aria-labelledby": `${selectId}-h` },
        h("div", { class: "panel-head" },
          h("h2", { id: `${selectId}-h` }, `Throughput, last ${HISTORY_MS / 60_000} minutes`),
          h("div", { class: "inline-field" }, h("label", { for: selectId }, "Queue"), select)),
        chartBox, legend,
        h("p", { class: "hint" }, "Measured by this page from the change in completed and archived counts every 2 s since it was opened.")),
      h("section", { class: "panel" }, h("h2", null, "Queues"), tableBox));

    function renderSelect() {
      const names = store.queues.map((q) => q.name);
      const options = ["", ...names];
      const current = [...select.options].map((o) => o.value);
      if (JSON.stringify(current) !== JSON.stringify(options)) {
        select.replaceChildren(...options.map((name) => h("option", { value: name }, name || "All queues")));
      }
      if (chartQueue && !names.includes(chartQueue)) chartQueue = "";
      select.value = chartQueue;
    }

    function renderCards() {
      const totals = { pending: 0, active: 0, retry: 0, scheduled: 0 };
      for (const q of store.queues) for (const k of Object.keys(totals)) totals[k] += q.counts[k];
      const paused = store.queues.filter((q) => q.paused).length;
      const lastMinute = store.totals(chartQueue, 60_000);
      const perSec = lastMinute.seconds > 0 ? lastMinute.completed / lastMinute.seconds : 0;
      const finished = lastMinute.completed + lastMinute.archived;
      const card = (label, value, note, key) => h("div", { class: "card", dataset: { card: key } },
        h("span", { class: "card-label" }, label), h("span", { class: "card-value" }, value), note ? h("span", { class: "card-note" }, note) : null);
      replaceKeepingFocus(cards,
        card("Queues", count(store.queues.length), paused ? `${paused} paused` : "none paused", "queues"),
        card("Pending", count(totals.pending), `${count(totals.scheduled)} scheduled, ${count(totals.retry)} in retry`, "pending"),
        card("Active", count(totals.active), "leased by workers", "active"),
        card("Completed / s", rate(perSec), chartQueue ? `queue ${chartQueue}, last minute` : "all queues, last minute", "throughput"),
        card("Failure rate", finished ? percent(lastMinute.archived / finished) : "—", `${count(lastMinute.archived)} archived of ${count(finished)} finished`, "failures"));
    }

    function renderChart() {
      const now = Date.now();
      const { completed, archived } = store.series(chartQueue);
      const last = (points) => {
        for (let i = points.length - 1; i >= 0; i--) if (points[i].v !== null) return points[i].v;
        return 0;
      };
      const label = `Throughput of ${chartQueue || "all queues"}: ${rate(last(completed))} completed and ${rate(last(archived))} archived per second now`;
      chartBox.replaceChildren(lineChart({
        from: now - HISTORY_MS, to: now, label, width: chartBox.clientWidth || 720, height: chartBox.clientWidth < 500 ? 180 : 220,
        series: [
          { name: "completed", className: "completed", points: completed },
          { name: "archived", className: "archived", points: archived },
        ],
      }));
      if (completed.length === 0) chartBox.append(h("p", { class: "chart-empty" }, "Collecting data…"));
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
        h("td", null, q.owner)));
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

    const onResize = () => renderChart();
    window.addEventListener("resize", onResize);
    render();
    return { refresh: render, unmount: () => window.removeEventListener("resize", onResize) };
  },
});
