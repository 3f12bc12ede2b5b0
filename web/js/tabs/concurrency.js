// Concurrency: per-queue, per-key limits — list them with tasks in flight and held, set
// and clear them live.

import { field, h, replaceKeepingFocus, table } from "../dom.js";
import { count, toNum } from "../format.js";
import { clearInvalid, messageArea, pageHeader, queueInput } from "../ui.js";
import { registerTab } from "./registry.js";

registerTab({
  id: "concurrency",
  title: "Concurrency",
  order: 40,
  mount(container, ctx) {
    const { store, api } = ctx;
    const messages = messageArea();
    const picker = queueInput(store, { value: ctx.route.params.get("queue") ?? "" });
    const max = h("input", { type: "number", name: "max", inputmode: "numeric", step: "1", "data-field": "max" });
    const form = h("form", { class: ["inline-form", "admin-only"], novalidate: true, "aria-label": "Set a concurrency limit" },
      field("Queue", picker.input), picker.list,
      field("Max running per key", max),
      h("div", { class: "field submit" }, h("button", { type: "submit", class: "button primary" }, "Set limit")));
    const tableBox = h("div");
    container.append(
      pageHeader("Concurrency limits",
        "Tasks of a queue that share a concurrency key run at most max at once; keys run in parallel and keyless tasks are never held. Changes apply at once."),
      h("section", { class: "panel" }, h("h2", null, "Set a limit"), form, messages.el),
      h("section", { class: "panel" }, h("h2", null, "Limits"), tableBox));

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearInvalid(form);
      const queue = picker.input.value.trim();
      const body = { queue, max: max.value.trim() === "" ? 0 : Number(max.value) };
      if (!Number.isInteger(body.max) || body.max < 0) {
        messages.error(`max: must be a whole number, got ${max.value}`);
        max.setAttribute("aria-invalid", "true");
        max.focus();
        return;
      }
      try {
        const res = await api.admin("SetQueueConcurrencyLimit", body);
        messages.info(`Queue ${queue}: at most ${res.limit?.max ?? body.max} running per concurrency key.`);
        await load();
      } catch (err) {
        messages.error(err, form);
      }
    });

    async function clear(queue) {
      const ok = await ctx.confirm({
        title: `Clear the limit of ${queue}?`,
        body: `Every concurrency key of ${queue} becomes unbounded; held tasks are dispatched.`,
        confirmLabel: "Clear limit",
        danger: true,
      });
      if (!ok) return;
      try {
        await api.admin("DeleteQueueConcurrencyLimit", { queue });
        messages.info(`Queue ${queue}: concurrency limit removed.`);
        await load();
      } catch (err) {
        messages.error(err);
      }
    }

    function edit(limit) {
      picker.input.value = limit.queue;
      max.value = String(toNum(limit.max));
      max.focus();
      max.select();
    }

    let lastData = "";
    async function load() {
      let res;
      try {
        res = await api.admin("ListConcurrencyLimits", {});
      } catch (err) {
        if (!lastData) tableBox.replaceChildren(h("p", { class: "empty" }, "Could not load the limits."));
        if (err?.name !== "UnreachableError") messages.error(err);
        return;
      }
      const data = JSON.stringify(res);
      if (data === lastData) return;
      lastData = data;
      const limits = res.limits ?? [];
      if (limits.length === 0) {
        tableBox.replaceChildren(h("p", { class: "empty" }, "No concurrency limits: every key is unbounded."));
        return;
      }
      replaceKeepingFocus(tableBox, table({
        caption: "Concurrency limits",
        className: "data",
        head: ["Queue", { text: "Max per key", class: "num" }, { text: "In flight", class: "num" }, { text: "Held", class: "num" }, "Actions"],
        rows: limits.map((l) => h("tr", { dataset: { queue: l.queue } },
          h("th", { scope: "row" }, l.queue),
          h("td", { class: "num", dataset: { col: "max" } }, count(l.max)),
          h("td", { class: "num", dataset: { col: "in-flight" } }, count(l.inFlight)),
          h("td", { class: "num", dataset: { col: "held" } }, count(l.held)),
          h("td", { class: "actions" },
            h("button", { type: "button", class: ["button", "admin-only"], "data-focus-key": `edit:${l.queue}`, onclick: () => edit(l) },
              "Edit", h("span", { class: "visually-hidden" }, ` limit of ${l.queue}`)),
            h("button", { type: "button", class: ["button", "danger", "admin-only"], "data-focus-key": `clear:${l.queue}`, onclick: () => clear(l.queue) },
              "Clear", h("span", { class: "visually-hidden" }, ` limit of ${l.queue}`))))),
      }));
    }

    void load();
    return { refresh: load, unmount: () => picker.unsubscribe() };
  },
});
