// Groups: aggregation thresholds (group override → queue default → server default) — list,
// set and clear them — and the live groups: filling up, or fired and waiting for a worker.

import { field, h, replaceKeepingFocus, table } from "../dom.js";
import { compactDuration, count, parseDuration, relative, toNum } from "../format.js";
import { href } from "../router.js";
import { clearInvalid, messageArea, pageHeader, queueInput } from "../ui.js";
import { registerTab } from "./registry.js";

const READY = "GROUP_STATE_READY";

/** "max size 20, max delay 2m, grace 5s" */
const describe = (c) => `max size ${count(c.maxSize)}, max delay ${compactDuration(c.maxDelayMs)}, grace ${compactDuration(c.graceMs)}`;

registerTab({
  id: "groups",
  title: "Groups",
  order: 60,
  mount(container, ctx) {
    const { store, api } = ctx;
    const messages = messageArea();
    const liveMessages = messageArea();
    const picker = queueInput(store, { value: ctx.route.params.get("queue") ?? "" });
    const text = (name, dataField, extra) => h("input", {
      type: "text", name, autocomplete: "off", spellcheck: "false", "data-field": dataField, ...extra,
    });
    const group = text("group", "group", { placeholder: "all groups", value: ctx.route.params.get("group") ?? "" });
    const maxSize = h("input", { type: "number", name: "max-size", inputmode: "numeric", step: "1", min: "1", "data-field": "max_size" });
    const maxDelay = text("max-delay", "max_delay_ms", { class: "short" });
    const grace = text("grace", "grace_ms", { class: "short" });
    const form = h("form", { class: ["inline-form", "admin-only"], novalidate: true, "aria-label": "Set group thresholds" },
      field("Queue", picker.input), picker.list,
      field("Group", group, "empty: the queue's default for groups without their own"),
      field("Max size", maxSize, "fire at this many members"),
      field("Max delay", maxDelay, "after the first member, e.g. 2m"),
      field("Grace", grace, "after the last member, e.g. 5s"),
      h("div", { class: "field submit" }, h("button", { type: "submit", class: "button primary" }, "Set thresholds")));
    const warnings = h("div", { class: "group-warnings" });
    const liveBox = h("div");
    const configHeading = h("h2", { tabindex: "-1" }, "Thresholds");
    const configBox = h("div");
    container.append(
      pageHeader("Groups",
        "Tasks enqueued with a group wait aggregating and reach a batch handler together when their group fires: at max size members, max delay after the first or grace after the last. Thresholds come from the group's override, else its queue's default, else the server's; changes apply at once (a group over its new max size fires, the others wait for their new deadline)."),
      h("section", { class: "panel" }, h("h2", null, "Live groups"), liveMessages.el, warnings, liveBox),
      h("section", { class: "panel" }, h("h2", null, "Set thresholds"), form, messages.el),
      h("section", { class: "panel" }, configHeading, configBox));

    /** The last ListGroupConfigs answer: for the clear dialog's fallback and the placeholders. */
    let configs = { configs: [], serverDefault: undefined };

    /** A duration field as milliseconds; empty is 0 (the server says what it needs). */
    function durationOf(input, label) {
      const value = input.value.trim();
      if (value === "") return 0;
      try {
        return parseDuration(value);
      } catch (err) {
        input.setAttribute("aria-invalid", "true");
        input.focus();
        throw new Error(`${label}: ${err.message}`);
      }
    }

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearInvalid(form);
      const queue = picker.input.value.trim();
      const groupName = group.value.trim();
      const size = maxSize.value.trim() === "" ? 0 : Number(maxSize.value);
      if (!Number.isInteger(size) || size < 0) {
        messages.error(`max size: must be a whole number, got ${maxSize.value}`);
        maxSize.setAttribute("aria-invalid", "true");
        maxSize.focus();
        return;
      }
      let maxDelayMs;
      let graceMs;
      try {
        maxDelayMs = durationOf(maxDelay, "max delay");
        graceMs = durationOf(grace, "grace");
      } catch (err) {
        messages.error(err.message);
        return;
      }
      const config = { queue, group: groupName, maxSize: size, maxDelayMs: String(maxDelayMs), graceMs: String(graceMs) };
      try {
        const res = await api.admin("SetGroupConfig", { config });
        const saved = res.config ?? config;
        messages.info(`Queue ${queue}, ${groupName ? `group ${groupName}` : "queue default"}: ${describe(saved)} (applies now).`);
        await Promise.all([loadConfigs(), loadLive()]);
      } catch (err) {
        messages.error(err, form);
      }
    });

    function fallbackOf(queue, groupName) {
      const queueDefault = configs.configs.find((c) => c.queue === queue && c.group === "");
      if (groupName && queueDefault) return `the default of ${queue} (${describe(queueDefault)})`;
      return configs.serverDefault ? `the server default (${describe(configs.serverDefault)})` : "the server default";
    }

    async function clear(c) {
      const ok = await ctx.confirm({
        title: c.group ? `Clear the thresholds of group ${c.group} in ${c.queue}?` : `Clear the default thresholds of ${c.queue}?`,
        body: [
          h("p", null, c.group
            ? `Group ${c.group} of ${c.queue} falls back to ${fallbackOf(c.queue, c.group)}.`
            : `Groups of ${c.queue} without their own thresholds fall back to ${fallbackOf(c.queue, "")}.`),
          h("p", null, "Groups filling up now use the new thresholds at once."),
        ],
        confirmLabel: "Clear thresholds",
        danger: true,
      });
      if (!ok) return;
      try {
        await api.admin("DeleteGroupConfig", { queue: c.queue, group: c.group });
        messages.info(`Queue ${c.queue}, ${c.group ? `group ${c.group}` : "queue default"}: override removed.`);
        await Promise.all([loadConfigs(), loadLive()]);
        // The row (and the button that had the focus) is gone: keep the keyboard here.
        if (!container.contains(document.activeElement)) configHeading.focus();
      } catch (err) {
        messages.error(err);
      }
    }

    function edit(c) {
      picker.input.value = c.queue;
      group.value = c.group;
      maxSize.value = String(toNum(c.maxSize));
      maxDelay.value = compactDuration(c.maxDelayMs);
      grace.value = compactDuration(c.graceMs);
      maxSize.focus();
      maxSize.select();
    }

    let lastConfigs = "";
    async function loadConfigs() {
      let res;
      try {
        res = await api.admin("ListGroupConfigs", {});
      } catch (err) {
        if (!lastConfigs) configBox.replaceChildren(h("p", { class: "empty" }, "Could not load the thresholds."));
        if (err?.name !== "UnreachableError") messages.error(err);
        return;
      }
      const data = JSON.stringify(res);
      if (data === lastConfigs) return;
      lastConfigs = data;
      configs = { configs: res.configs ?? [], serverDefault: res.serverDefault };
      const fallback = res.serverDefault;
      if (fallback) {
        maxSize.placeholder = String(toNum(fallback.maxSize));
        maxDelay.placeholder = compactDuration(fallback.maxDelayMs);
        grace.placeholder = compactDuration(fallback.graceMs);
      }
      const cells = (c) => [
        h("td", { class: "num", dataset: { col: "max-size" } }, count(c.maxSize)),
        h("td", { class: "num", dataset: { col: "max-delay" } }, compactDuration(c.maxDelayMs)),
        h("td", { class: "num", dataset: { col: "grace" } }, compactDuration(c.graceMs)),
      ];
      const rows = configs.configs.map((c) => {
        const what = c.group ? ` thresholds of group ${c.group} in ${c.queue}` : ` default thresholds of ${c.queue}`;
        const key = `${c.queue}\u0000${c.group}`;
        return h("tr", { dataset: { queue: c.queue, group: c.group } },
          h("th", { scope: "row" }, c.queue),
          h("td", { dataset: { col: "group" } }, c.group ? h("span", { class: "mono" }, c.group) : h("span", { class: "muted" }, "(queue default)")),
          cells(c),
          h("td", { class: "actions" },
            h("button", { type: "button", class: ["button", "admin-only"], "data-focus-key": `edit:${key}`, onclick: () => edit(c) },
              "Edit", h("span", { class: "visually-hidden" }, what)),
            h("button", { type: "button", class: ["button", "danger", "admin-only"], "data-focus-key": `clear:${key}`, onclick: () => clear(c) },
              "Clear", h("span", { class: "visually-hidden" }, what))));
      });
      if (fallback) {
        rows.push(h("tr", { class: "default-row", dataset: { serverDefault: "" } },
          h("th", { scope: "row" }, h("span", { class: "muted" }, "(every queue)")),
          h("td", { dataset: { col: "group" } }, h("span", { class: "muted" }, "(server default)")),
          cells(fallback),
          h("td", { class: "muted" }, "node settings")));
      }
      replaceKeepingFocus(configBox,
        configs.configs.length === 0 ? h("p", { class: "empty" }, "No overrides: every group uses the server default.") : null,
        table({
          caption: "Group thresholds: overrides and the server default",
          className: "data group-configs",
          head: ["Queue", "Group", { text: "Max size", class: "num" }, { text: "Max delay", class: "num" }, { text: "Grace", class: "num" }, "Actions"],
          rows,
        }),
        h("p", { class: "hint" }, "The server default comes from group_max_size, group_max_delay and group_grace_period in the node's settings."));
    }

    let lastWarnings = "";
    function renderWarnings(groups) {
      const missing = new Map();
      for (const g of groups) if (!g.workerAvailable) missing.set(`${g.queue}\u0000${g.type}`, { queue: g.queue, type: g.type });
      const key = [...missing.keys()].sort().join("\u0001");
      if (key === lastWarnings) return;
      lastWarnings = key;
      if (missing.size === 0) {
        warnings.replaceChildren();
        return;
      }
      warnings.replaceChildren(h("div", { class: "alert warn", role: "alert" },
        h("strong", null, "Warning: "), "these groups are not delivered until a worker with a batch handler (mux.handleBatch) for their type leases from their queue.",
        h("ul", null, [...missing.values()].map((m) => h("li", null, `No connected worker has a batch handler for ${m.type} on ${m.queue}.`)))));
    }

    let lastLive = "";
    async function loadLive() {
      let res;
      try {
        res = await api.admin("ListGroups", {});
      } catch (err) {
        if (!lastLive) liveBox.replaceChildren(h("p", { class: "empty" }, "Could not load the live groups."));
        if (err?.name !== "UnreachableError") liveMessages.error(err);
        return;
      }
      lastLive = JSON.stringify(res);
      liveMessages.clear();
      const groups = res.groups ?? [];
      renderWarnings(groups);
      if (groups.length === 0) {
        liveBox.replaceChildren(h("p", { class: "empty" },
          "No live groups. Tasks enqueued with a group appear here while they aggregate, and fired batches while they wait for a worker."));
        return;
      }
      const now = Date.now();
      const ago = (ms) => (toNum(ms) ? relative(ms, now) : "—");
      const fires = (g) => {
        if (g.state === READY) return "fired";
        const at = toNum(g.nextFireAtMs);
        return at <= now ? "now" : relative(at, now);
      };
      const rows = groups.map((g) => {
        const ready = g.state === READY;
        return h("tr", { dataset: { queue: g.queue, group: g.group, type: g.type, state: ready ? "ready" : "aggregating" } },
          h("th", { scope: "row" }, h("a", {
            href: href(["tasks"], { queue: g.queue, state: ready ? "pending" : "aggregating" }), "data-focus-key": `live:${g.queue}\u0000${g.group}\u0000${g.type}\u0000${g.state}`,
          }, g.queue)),
          h("td", { class: "mono", dataset: { col: "group" } }, g.group),
          h("td", { dataset: { col: "type" } }, g.type),
          h("td", { dataset: { col: "state" } }, ready
            ? h("span", { class: "badge state-ready" }, "fired, waiting for a worker")
            : h("span", { class: "badge state-aggregating" }, "aggregating")),
          h("td", { class: "num", dataset: { col: "size" } }, count(g.size)),
          h("td", { dataset: { col: "first" } }, ago(g.firstMemberAtMs)),
          h("td", { dataset: { col: "last" } }, ago(g.lastMemberAtMs)),
          h("td", { dataset: { col: "fires" } }, fires(g)),
          h("td", { class: "muted", dataset: { col: "config" } }, g.config
            ? [h("span", { "aria-hidden": "true" }, `${count(g.config.maxSize)} · ${compactDuration(g.config.maxDelayMs)} · ${compactDuration(g.config.graceMs)}`),
              h("span", { class: "visually-hidden" }, describe(g.config))]
            : "—"),
          g.workerAvailable
            ? h("td", { class: "ok-text", dataset: { col: "worker" } }, "connected")
            : h("td", { class: "warning", dataset: { col: "worker" } },
              h("span", { class: "warning-mark", "aria-hidden": "true" }, "⚠ "), h("strong", null, "none"),
              // The full sentence is in the warning above the table; here for screen readers.
              h("span", { class: "visually-hidden" }, `: no connected worker has a batch handler for ${g.type} on ${g.queue}`)));
      });
      replaceKeepingFocus(liveBox, table({
        caption: "Live groups",
        className: "data live-groups",
        head: ["Queue", "Group", "Type", "State", { text: "Size", class: "num" }, "First member", "Last member", "Fires", "Size · delay · grace", "Batch worker"],
        rows,
      }));
    }

    void loadConfigs();
    void loadLive();
    return {
      refresh: () => Promise.all([loadConfigs(), loadLive()]),
      unmount: () => picker.unsubscribe(),
    };
  },
});
