// Schedules: periodic tasks of every queue — next tick, last task; create or replace,
// pause, resume, run now and delete.

import { field, h, replaceKeepingFocus, table } from "../dom.js";
import { compactDuration, duration, parseDuration, relative, stateName, timestamp, toNum } from "../format.js";
import { href } from "../router.js";
import { clearInvalid, messageArea, pageHeader, queueInput, stateBadge } from "../ui.js";
import { registerTab } from "./registry.js";

function durationOrUndefined(text) {
  try {
    return parseDuration(text);
  } catch {
    return undefined; // sent as a cron expression: the node names what is wrong with it
  }
}

const cadenceText = (s) => (s.cron !== undefined ? `cron ${s.cron} (${s.timeZone || "UTC"})` : `every ${duration(s.intervalMs)}`);

registerTab({
  id: "schedules",
  title: "Schedules",
  order: 65,
  mount(container, ctx) {
    const { store, api } = ctx;
    const messages = messageArea();
    const picker = queueInput(store, { value: ctx.route.params.get("queue") ?? "" });
    const input = (name, dataField, props = {}) => h("input", { type: "text", name, autocomplete: "off", spellcheck: "false", "data-field": dataField, ...props });
    const name = input("name", "name");
    const type = input("type", "type");
    const cadence = input("cadence", "cron", { placeholder: "*/5 * * * * or 30s" });
    const zone = input("zone", "time_zone", { placeholder: "UTC" });
    const payload = h("textarea", { name: "payload", rows: 2, spellcheck: "false", "data-field": "payload", placeholder: "{}" });
    const missed = h("select", { name: "missed", "data-field": "missed_ticks" },
      h("option", { value: "MISSED_TICKS_LATEST" }, "enqueue the latest"), h("option", { value: "MISSED_TICKS_SKIP" }, "skip them"));
    const guard = h("input", { type: "checkbox", name: "skip-if-running" });
    const form = h("form", { class: "inline-form", novalidate: true, "aria-label": "Set a schedule" },
      field("Queue", picker.input), picker.list,
      field("Name", name),
      field("Task type", type),
      field("Cron or interval", cadence, "a cron expression (5 fields, or 6 with seconds) or a duration like 30s"),
      field("Time zone", zone, "IANA name, cron only; blank: UTC"),
      field("Missed ticks", missed),
      field("Skip while running", guard),
      field("Payload (JSON)", payload),
      h("div", { class: "field submit" }, h("button", { type: "submit", class: "button primary" }, "Set schedule")));
    const tableBox = h("div");
    container.append(
      pageHeader("Schedules", "Periodic tasks: each schedule enqueues its task once per tick of its cron expression or interval, durably; setting an existing name replaces it."),
      h("section", { class: "panel" }, h("h2", null, "Set a schedule"), form, messages.el),
      h("section", { class: "panel" }, h("h2", null, "Schedules"), tableBox));

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearInvalid(form);
      const text = cadence.value.trim();
      // A cron expression has spaces; a duration has none.
      const everyMs = text !== "" && !/\s/.test(text) ? durationOrUndefined(text) : undefined;
      const schedule = {
        name: name.value.trim(),
        task: { queue: picker.input.value.trim(), type: type.value.trim() },
        timeZone: zone.value.trim(),
        missedTicks: missed.value,
        skipIfRunning: guard.checked,
      };
      if (everyMs !== undefined) schedule.intervalMs = String(everyMs);
      else if (text !== "") schedule.cron = text;
      if (payload.value.trim() !== "") {
        try {
          JSON.parse(payload.value);
        } catch (err) {
          messages.error(`payload: not valid JSON (${err.message})`);
          return;
        }
        schedule.task.payload = btoa(String.fromCharCode(...new TextEncoder().encode(payload.value)));
        schedule.task.contentType = "application/json";
      }
      try {
        const res = await api.admin("SetSchedule", { schedule });
        const s = res.schedule ?? {};
        messages.info(`Schedule ${s.name} of queue ${s.task?.queue}: ${cadenceText(s)}, next tick ${timestamp(s.nextTickAtMs)}.`);
        await load();
      } catch (err) {
        messages.error(err, form);
      }
    });

    const target = (s) => ({ queue: s.task?.queue ?? "", name: s.name });
    const label = (s) => `${s.name} in ${s.task?.queue}`;

    async function act(method, s, done) {
      try {
        const res = await api.admin(method, target(s));
        messages.info(done(res));
        await load();
      } catch (err) {
        messages.error(err);
      }
    }

    async function remove(s) {
      const ok = await ctx.confirm({
        title: `Delete the schedule ${label(s)}?`,
        body: "No more ticks are enqueued; the tasks it already enqueued stay.",
        confirmLabel: "Delete schedule",
        danger: true,
      });
      if (ok) await act("DeleteSchedule", s, () => `Schedule ${label(s)} deleted.`);
    }

    function edit(s) {
      picker.input.value = s.task?.queue ?? "";
      name.value = s.name;
      type.value = s.task?.type ?? "";
      cadence.value = s.cron ?? compactDuration(toNum(s.intervalMs));
      zone.value = s.timeZone ?? "";
      missed.value = s.missedTicks ?? "MISSED_TICKS_LATEST";
      guard.checked = Boolean(s.skipIfRunning);
      cadence.focus();
    }

    const button = (text, key, onclick, s, danger = false) =>
      h("button", { type: "button", class: danger ? "button danger" : "button", "data-focus-key": `${key}:${s.task?.queue}/${s.name}`, onclick },
        text, h("span", { class: "visually-hidden" }, ` schedule ${label(s)}`));

    function row(s) {
      const last = s.lastTaskId
        ? [h("a", { class: "mono", href: href(["tasks", "task"], { id: s.lastTaskId }) }, s.lastTaskId), " ",
          s.lastTaskState && s.lastTaskState !== "TASK_STATE_UNSPECIFIED" ? stateBadge(stateName(s.lastTaskState)) : null]
        : "—";
      const next = s.paused || !s.nextTickAtMs || s.nextTickAtMs === "0" ? "—" : `${timestamp(s.nextTickAtMs)} (${relative(s.nextTickAtMs)})`;
      return h("tr", { dataset: { queue: s.task?.queue ?? "", name: s.name } },
        h("td", { dataset: { col: "queue" } }, s.task?.queue ?? ""),
        h("th", { scope: "row", dataset: { col: "name" } }, s.name),
        h("td", { dataset: { col: "type" } }, s.task?.type ?? ""),
        h("td", { dataset: { col: "cadence" } }, cadenceText(s)),
        h("td", { dataset: { col: "status" } }, s.paused ? h("span", { class: "badge paused" }, "paused") : h("span", { class: "badge running" }, "active")),
        h("td", { dataset: { col: "next" } }, next),
        h("td", { dataset: { col: "last" } }, last),
        h("td", { class: "actions" },
          s.paused
            ? button("Resume", "resume", () => act("ResumeSchedule", s, () => `Schedule ${label(s)} resumed.`), s)
            : button("Pause", "pause", () => act("PauseSchedule", s, () => `Schedule ${label(s)} paused.`), s),
          button("Run now", "run", () => act("RunScheduleNow", s, (res) => `Schedule ${label(s)}: enqueued ${res.taskId}.`), s),
          button("Edit", "edit", () => edit(s), s),
          button("Delete", "delete", () => remove(s), s, true)));
    }

    let lastData = "";
    async function load() {
      let res;
      try {
        res = await api.admin("ListSchedules", {});
      } catch (err) {
        if (!lastData) tableBox.replaceChildren(h("p", { class: "empty" }, "Could not load the schedules."));
        if (err?.name !== "UnreachableError") messages.error(err);
        return;
      }
      const schedules = res.schedules ?? [];
      // Relative times change every refresh: redraw whenever anything (or the minute) moved.
      const data = JSON.stringify(schedules) + Math.floor(Date.now() / 1000);
      if (data === lastData) return;
      lastData = data;
      if (schedules.length === 0) {
        tableBox.replaceChildren(h("p", { class: "empty" }, "No schedules."));
        return;
      }
      replaceKeepingFocus(tableBox, table({
        caption: "Schedules",
        className: "data schedules",
        head: ["Queue", "Name", "Task type", "Cadence", "Status", "Next tick", "Last task", "Actions"],
        rows: schedules.map(row),
      }));
    }

    void load();
    return { refresh: load, unmount: () => picker.unsubscribe() };
  },
});
