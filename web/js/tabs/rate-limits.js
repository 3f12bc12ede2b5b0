// Rate limits: the server default and per-queue token buckets — list, set and clear.

import { field, h, replaceKeepingFocus, table } from "../dom.js";
import { count, rate } from "../format.js";
import { clearInvalid, messageArea, pageHeader, queueInput } from "../ui.js";
import { registerTab } from "./registry.js";

registerTab({
  id: "rate-limits",
  title: "Rate limits",
  order: 50,
  mount(container, ctx) {
    const { store, api } = ctx;
    const messages = messageArea();
    const picker = queueInput(store, { value: ctx.route.params.get("queue") ?? "" });
    const ratePerSec = h("input", { type: "number", name: "rate", inputmode: "decimal", step: "any", "data-field": "rate_per_sec" });
    const burst = h("input", { type: "number", name: "burst", inputmode: "numeric", step: "1", placeholder: "auto", "data-field": "burst" });
    const form = h("form", { class: ["inline-form", "admin-only"], novalidate: true, "aria-label": "Set a rate limit" },
      field("Queue", picker.input), picker.list,
      field("Dispatches per second", ratePerSec),
      field("Burst", burst, "blank: max(1, ⌈rate⌉)"),
      h("div", { class: "field submit" }, h("button", { type: "submit", class: "button primary" }, "Set rate limit")));
    const defaultBox = h("p", { class: "default-limit" }, "Loading the server default…");
    const tableBox = h("div");
    container.append(
      pageHeader("Rate limits", "A token bucket per queue: a sustained rate of dispatches per second with a burst. An override replaces the server default for its queue; changes apply at once."),
      h("section", { class: "panel" }, h("h2", null, "Server default"), defaultBox),
      h("section", { class: "panel" }, h("h2", null, "Set an override"), form, messages.el),
      h("section", { class: "panel" }, h("h2", null, "Overrides"), tableBox));

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearInvalid(form);
      const queue = picker.input.value.trim();
      const body = { queue, ratePerSec: ratePerSec.value.trim() === "" ? 0 : Number(ratePerSec.value) };
      if (burst.value.trim() !== "") body.burst = Number(burst.value);
      if (!Number.isFinite(body.ratePerSec)) {
        messages.error(`rate_per_sec: must be a number, got ${ratePerSec.value}`);
        return;
      }
      if (body.burst !== undefined && !(Number.isInteger(body.burst) && body.burst >= 0)) {
        messages.error(`burst: must be a whole number, got ${burst.value}`);
        burst.setAttribute("aria-invalid", "true");
        burst.focus();
        return;
      }
      try {
        const res = await api.admin("SetQueueRateLimit", body);
        messages.info(`Queue ${queue}: ${rate(res.limit?.ratePerSec ?? body.ratePerSec)} per second, burst ${res.limit?.burst ?? body.burst}.`);
        await load();
      } catch (err) {
        messages.error(err, form);
      }
    });

    async function clear(queue, fallback) {
      const ok = await ctx.confirm({
        title: `Clear the rate limit of ${queue}?`,
        body: `${queue} falls back to the server default (${fallback}).`,
        confirmLabel: "Clear rate limit",
        danger: true,
      });
      if (!ok) return;
      try {
        await api.admin("DeleteQueueRateLimit", { queue });
        messages.info(`Queue ${queue}: rate limit override removed; it uses the server default.`);
        await load();
      } catch (err) {
        messages.error(err);
      }
    }

    function edit(limit) {
      picker.input.value = limit.queue;
      ratePerSec.value = String(limit.ratePerSec);
      burst.value = String(limit.burst);
      ratePerSec.focus();
      ratePerSec.select();
    }

    const describe = (l) => `${rate(l.ratePerSec)} per second, burst ${count(l.burst)}`;

    let lastData = "";
    async function load() {
      let res;
      try {
        res = await api.admin("ListRateLimits", {});
      } catch (err) {
        if (!lastData) tableBox.replaceChildren(h("p", { class: "empty" }, "Could not load the rate limits."));
        if (err?.name !== "UnreachableError") messages.error(err);
        return;
      }
      const data = JSON.stringify(res);
      if (data === lastData) return;
      lastData = data;
      const fallback = res.defaultLimit ? describe(res.defaultLimit) : "unlimited";
      defaultBox.replaceChildren(h("strong", { dataset: { defaultLimit: "" } }, fallback),
        res.defaultLimit
          ? " for every queue without an override (rate_limit_rate_per_sec in the node's settings)."
          : ": queues without an override are not rate limited (set rate_limit_rate_per_sec in the node's settings for a default).");
      const limits = res.limits ?? [];
      if (limits.length === 0) {
        tableBox.replaceChildren(h("p", { class: "empty" }, "No overrides: every queue uses the server default."));
        return;
      }
      replaceKeepingFocus(tableBox, table({
        caption: "Rate limit overrides",
        className: "data",
        head: ["Queue", { text: "Per second", class: "num" }, { text: "Burst", class: "num" }, "Actions"],
        rows: limits.map((l) => h("tr", { dataset: { queue: l.queue } },
          h("th", { scope: "row" }, l.queue),
          h("td", { class: "num", dataset: { col: "rate" } }, rate(l.ratePerSec)),
          h("td", { class: "num", dataset: { col: "burst" } }, count(l.burst)),
          h("td", { class: "actions" },
            h("button", { type: "button", class: ["button", "admin-only"], "data-focus-key": `edit:${l.queue}`, onclick: () => edit(l) },
              "Edit", h("span", { class: "visually-hidden" }, ` rate limit of ${l.queue}`)),
            h("button", { type: "button", class: ["button", "danger", "admin-only"], "data-focus-key": `clear:${l.queue}`, onclick: () => clear(l.queue, fallback) },
              "Clear", h("span", { class: "visually-hidden" }, ` rate limit of ${l.queue}`))))),
      }));
    }

    void load();
    return { refresh: load, unmount: () => picker.unsubscribe() };
  },
});
