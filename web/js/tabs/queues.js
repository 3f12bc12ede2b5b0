// Queues: pause and resume dispatch, and remove a queue with no unfinished task, each
// with a confirmation.

import { h, replaceKeepingFocus, table } from "../dom.js";
import { STATES, UNFINISHED, count } from "../format.js";
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

    /** DeleteQueue: only a queue with no unfinished task; its finished tasks and settings go too. */
    async function remove(name, finished) {
      const ok = await ctx.confirm({
        title: `Remove queue ${name}?`,
        body: `${name} and its settings (pause, limits, rate limit, group thresholds) are removed, with its ${count(finished)} finished task${finished === 1 ? "" : "s"}. This cannot be undone.`,
        confirmLabel: `Remove ${name}`,
        danger: true,
      });
      if (!ok) return;
      try {
        const res = await api.admin("DeleteQueue", { queue: name });
        const n = Number(res.deletedTasks ?? 0);
        messages.info(`Queue ${name} removed (${count(n)} finished task${n === 1 ? "" : "s"} deleted).`);
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
        const finished = STATES.reduce((n, s) => n + q.counts[s], 0) - unfinished;
        return h("tr", { dataset: { queue: q.name } },
          h("th", { scope: "row" }, q.name),
          h("td", null, pausedBadge(q.paused)),
          h("td", { class: "num" }, count(unfinished)),
          h("td", { class: "num" }, q.concurrencyLimit ? String(q.concurrencyLimit) : "—"),
          h("td", { class: "mono", dataset: { col: "owner" } }, q.owner || "—"),
          h("td", { class: "actions" },
            h("button", {
              type: "button", class: ["button", q.paused ? "primary" : "", "admin-only"], "data-focus-key": `pause:${q.name}`,
              onclick: () => setPaused(q.name, !q.paused),
            }, q.paused ? `Resume` : `Pause`, h("span", { class: "visually-hidden" }, ` ${q.name}`)),
            h("a", { class: "button link", href: href(["tasks"], { queue: q.name }), "data-focus-key": `tasks:${q.name}` },
              "Tasks", h("span", { class: "visually-hidden" }, ` of ${q.name}`)),
            h("button", {
              type: "button", class: "button danger", "data-focus-key": `remove:${q.name}`, disabled: unfinished > 0,
              title: unfinished > 0 ? `${count(unfinished)} unfinished tasks: cancel or delete them first` : `Remove ${q.name}`,
              onclick: () => remove(q.name, finished),
            }, "Remove", h("span", { class: "visually-hidden" }, ` ${q.name}`))));
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
