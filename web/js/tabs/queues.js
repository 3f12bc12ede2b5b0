// Queues: pause and resume dispatch, with a confirmation.

import { h, replaceKeepingFocus, table } from "../dom.js";
import { UNFINISHED, count } from "../format.js";
import { href } from "../router.js";
import { messageArea, pageHeader, pausedBadge } from "../ui.js";
import { registerTab } from "./registry.js";

registerTab({
  id: "queues",
  title: "Queues",
  order: 20,
  mount(container, ctx) {
    const { store, api } = ctx;
    const messages = messageArea();
    const tableBox = h("div");
    container.append(
      pageHeader("Queues", "Pausing a queue stops dispatch: its tasks stay where they are and running tasks finish. Resuming starts dispatch again."),
      messages.el,
      h("section", { class: "panel" }, tableBox));

    async function setPaused(name, paused) {
      const verb = paused ? "Pause" : "Resume";
      const ok = await ctx.confirm({
        title: `${verb} queue ${name}?`,
        body: paused
          ? `Workers stop receiving tasks from ${name}. Tasks already running finish; nothing is lost.`
          : `Workers start receiving tasks from ${name} again.`,
        confirmLabel: `${verb} ${name}`,
        danger: paused,
      });
      if (!ok) return;
      try {
        const res = await api.admin(paused ? "PauseQueue" : "ResumeQueue", { queue: name });
        messages.info(`Queue ${name} is ${res.queue?.paused ? "paused" : "running"}.`);
        await store.refresh();
        render();
      } catch (err) {
        messages.error(err);
      }
    }

    function render() {
      if (!store.loaded) {
        tableBox.replaceChildren(h("p", { class: "empty" }, "Loading…"));
        return;
      }
      if (store.queues.length === 0) {
        tableBox.replaceChildren(h("p", { class: "empty" }, "No queues yet."));
        return;
      }
      const rows = store.queues.map((q) => {
        const unfinished = UNFINISHED.reduce((n, s) => n + q.counts[s], 0);
        return h("tr", { dataset: { queue: q.name } },
          h("th", { scope: "row" }, q.name),
          h("td", null, pausedBadge(q.paused)),
          h("td", { class: "num" }, count(unfinished)),
          h("td", { class: "num" }, q.concurrencyLimit ? String(q.concurrencyLimit) : "—"),
          h("td", null, q.owner),
          h("td", { class: "actions" },
            h("button", {
              type: "button", class: ["button", q.paused ? "primary" : "", "admin-only"], "data-focus-key": `pause:${q.name}`,
              onclick: () => setPaused(q.name, !q.paused),
            }, q.paused ? `Resume` : `Pause`, h("span", { class: "visually-hidden" }, ` ${q.name}`)),
            h("a", { class: "button link", href: href(["tasks"], { queue: q.name }), "data-focus-key": `tasks:${q.name}` },
              "Tasks", h("span", { class: "visually-hidden" }, ` of ${q.name}`))));
      });
      replaceKeepingFocus(tableBox, table({
        caption: "Queues",
        className: "data",
        head: ["Queue", "Status", { text: "Unfinished", class: "num" }, { text: "Key limit", class: "num" }, "Owner", "Actions"],
        rows,
      }));
    }

    render();
    return { refresh: render };
  },
});
