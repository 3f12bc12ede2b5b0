// Workers: the workers calling this node (ListWorkers) — what each leases from and can
// run, how many tasks it holds of its concurrency, and when it was last heard from.

import { h, replaceKeepingFocus, table } from "../dom.js";
import { count, relative, timestamp, toNum } from "../format.js";
import { messageArea, pageHeader } from "../ui.js";
import { registerTab } from "./registry.js";

registerTab({
  id: "workers",
  title: "Workers",
  order: 35,
  mount(container, ctx) {
    const { api } = ctx;
    const messages = messageArea();
    const tableBox = h("div");
    container.append(
      pageHeader("Workers",
        "Workers that called this node recently. A worker is polling while a Lease call of it waits for work, busy otherwise; one quiet for a minute (or two heartbeat intervals) is gone, and one that stops gracefully leaves at once."),
      messages.el,
      h("section", { class: "panel" }, h("h2", null, "Connected workers"), tableBox));

    let lastData = "";
    async function load() {
      let res;
      try {
        res = await api.admin("ListWorkers", {});
      } catch (err) {
        if (!lastData) tableBox.replaceChildren(h("p", { class: "empty" }, "Could not load the workers."));
        if (err?.name !== "UnreachableError") messages.error(err);
        return;
      }
      const data = JSON.stringify(res);
      if (data === lastData) return;
      lastData = data;
      const workers = res.workers ?? [];
      if (workers.length === 0) {
        tableBox.replaceChildren(h("p", { class: "empty" }, "No workers: none has called this node in the last minute."));
        return;
      }
      const now = Date.now();
      const since = (ms) => [timestamp(ms), h("span", { class: "muted" }, ` (${relative(ms, now)})`)];
      replaceKeepingFocus(tableBox, table({
        caption: "Workers",
        className: "data",
        head: ["Worker", "Host", "Queues", "Task types", { text: "In flight", class: "num" }, { text: "Concurrency", class: "num" },
          "State", "Last seen", "Connected since"],
        rows: workers.map((w) => h("tr", { dataset: { worker: w.workerId } },
          h("th", { scope: "row", class: "mono" }, w.workerId),
          h("td", { dataset: { col: "host" } }, w.host || "—"),
          h("td", { dataset: { col: "queues" } }, (w.queues ?? []).join(", ")),
          h("td", { dataset: { col: "types" } }, (w.types ?? []).join(", ") || "—"),
          h("td", { class: "num", dataset: { col: "in-flight" } }, count(w.inFlight)),
          h("td", { class: "num", dataset: { col: "concurrency" } }, toNum(w.concurrency) ? count(w.concurrency) : "—"),
          h("td", { dataset: { col: "state" } }, w.polling ? "polling" : "busy"),
          h("td", { dataset: { col: "last-seen" } }, since(w.lastSeenAtMs)),
          h("td", { dataset: { col: "connected" } }, since(w.connectedSinceMs)))),
      }));
    }

    void load();
    return { refresh: load };
  },
});
