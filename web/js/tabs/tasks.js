// Tasks: browse a queue by state, page by page (ListTasks page tokens), and open a task
// to see everything about it and act on it.

import { h, replaceKeepingFocus, table, uid, field } from "../dom.js";
import {
  STATES, UNFINISHED, byteSize, count, describeBytes, duration, relative, stateName, stateWire, timestamp, toNum,
} from "../format.js";
import { href } from "../router.js";
import { actionButton, messageArea, pageHeader, queueInput, stateBadge } from "../ui.js";
import { registerTab } from "./registry.js";
import { columnCell, columnHead, columnsFor } from "./task-columns.js";

const PAGE_SIZES = [20, 50, 100, 200];
const DEFAULT_PAGE_SIZE = 50;

/** The operator actions on one task, with the states each applies to (see admin_service.proto). */
const ACTIONS = [
  {
    id: "cancel", label: "Cancel", method: "CancelTask", danger: true, states: UNFINISHED,
    explain: "The task will not run (again). A running task's worker is told to stop through its heartbeat.",
  },
  {
    id: "run", label: "Run now", method: "RunTask", states: ["scheduled", "retry"],
    explain: "The task becomes pending now instead of waiting for its scheduled time or backoff.",
  },
  {
    id: "archive", label: "Archive", method: "ArchiveTask", danger: true, states: ["scheduled", "pending", "retry", "aggregating"],
    explain: "The task moves to the dead letter (archived) without running.",
  },
  {
    id: "retry", label: "Retry", method: "RetryTask", states: ["archived", "cancelled"],
    explain: "The task goes back to pending with a fresh set of retries.",
  },
  {
    id: "delete", label: "Delete", method: "DeleteTask", danger: true, states: STATES.filter((s) => s !== "active"),
    explain: "The task is removed for good. This cannot be undone.",
  },
];

/**
 * Bulk actions on every task of a queue in one state (BulkTaskAction): the same actions,
 * for the same states, as on one task (ACTIONS), except "run now".
 */
const BULK = {
  retry: { wire: "BULK_ACTION_RETRY", done: "retried" },
  archive: { wire: "BULK_ACTION_ARCHIVE", done: "archived" },
  delete: { wire: "BULK_ACTION_DELETE", done: "deleted" },
  cancel: { wire: "BULK_ACTION_CANCEL", done: "cancelled" },
};

registerTab({
  id: "tasks",
  title: "Tasks",
  order: 30,
  mount(container, ctx) {
    let view = null; // { kind: "list" | "task", key, controller }

    function show(route) {
      const kind = route.sub === "task" ? "task" : "list";
      if (view?.kind === kind && view.controller.update) {
        view.controller.update(route);
        return;
      }
      view?.controller.unmount?.();
      container.replaceChildren();
      view = { kind, controller: kind === "task" ? taskView(container, ctx, route) : listView(container, ctx, route) };
    }

    show(ctx.route);
    return {
      update: show,
      refresh: () => view?.controller.refresh(),
      unmount: () => view?.controller.unmount?.(),
    };
  },
});

// ---------------------------------------------------------------- the task list

function listView(container, ctx, initialRoute) {
  const { store, api } = ctx;
  const messages = messageArea();
  const picker = queueInput(store);
  const stateSelect = h("select", { name: "state" },
    h("option", { value: "" }, "All states"), STATES.map((s) => h("option", { value: s }, s)));
  const sizeSelect = h("select", { name: "size" }, PAGE_SIZES.map((n) => h("option", { value: String(n) }, String(n))));
  const form = h("form", { class: "filters", novalidate: true },
    field("Queue", picker.input), picker.list,
    field("State", stateSelect),
    field("Per page", sizeSelect),
    h("div", { class: "field submit" }, h("button", { type: "submit", class: "button primary" }, "Show tasks")));
  const stateNav = h("nav", { class: "state-filter", "aria-label": "Filter by state" });
  const bulkBar = h("div", { class: "toolbar bulk-actions", role: "group", "aria-label": "Act on every task in this state" });
  const results = h("div", { class: "results" });
  const pager = h("div", { class: "pager" });
  container.append(pageHeader("Tasks", "Browse a queue's tasks by state; open a task to see it in full and act on it."),
    form, messages.el, stateNav, bulkBar, h("section", { class: "panel" }, results, pager));

  let q = { queue: "", state: "", size: DEFAULT_PAGE_SIZE, page: "" };
  /** Tokens of the pages before this one (for Previous), reset when the filter changes. */
  let previous = [];
  let lastData = "";
  let nextToken = "";
  let loadSeq = 0;

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.navigate(["tasks"], { queue: picker.input.value.trim(), state: stateSelect.value, size: sizeSelect.value === String(DEFAULT_PAGE_SIZE) ? "" : sizeSelect.value });
  });

  function readRoute(route) {
    const p = route.params;
    const size = Number(p.get("size")) || DEFAULT_PAGE_SIZE;
    const next = { queue: p.get("queue") ?? "", state: p.get("state") ?? "", size, page: p.get("page") ?? "" };
    if (next.queue !== q.queue || next.state !== q.state || next.size !== q.size) previous = [];
    if (!next.page) previous = [];
    q = next;
    picker.input.value = q.queue;
    stateSelect.value = STATES.includes(q.state) ? q.state : "";
    sizeSelect.value = PAGE_SIZES.includes(q.size) ? String(q.size) : String(DEFAULT_PAGE_SIZE);
    lastData = "";
  }

  function renderStateNav() {
    const info = store.queue(q.queue);
    if (!q.queue) {
      stateNav.replaceChildren();
      return;
    }
    const total = info ? STATES.reduce((n, s) => n + info.counts[s], 0) : 0;
    const link = (state, label, n) => h("a", {
      href: href(["tasks"], { queue: q.queue, state, size: q.size === DEFAULT_PAGE_SIZE ? "" : q.size }),
      "aria-current": q.state === state ? "page" : false,
      class: "pill",
      "data-focus-key": `state:${state}`,
    }, label, info ? h("span", { class: "pill-count" }, count(n)) : null);
    replaceKeepingFocus(stateNav, h("ul", null,
      h("li", null, link("", "all", total)),
      STATES.map((s) => h("li", null, link(s, s, info?.counts[s] ?? 0)))));
  }

  /** Buttons for the bulk actions that apply to the chosen state (none without a queue and a state). */
  function renderBulkBar() {
    const key = `${q.queue}\0${q.state}`;
    if (bulkBar.dataset.key === key) return;
    bulkBar.dataset.key = key;
    const actions = q.queue && q.state ? ACTIONS.filter((a) => BULK[a.id] && a.states.includes(q.state)) : [];
    bulkBar.replaceChildren(...actions.map((a) => actionButton(`${a.label} all`,
      { class: ["button", a.danger ? "danger" : ""], dataset: { bulk: a.id } }, () => actOnAll(a))));
  }

  async function actOnAll(action) {
    const { queue, state } = q;
    const n = store.queue(queue)?.counts[state] ?? 0;
    const ok = await ctx.confirm({
      title: `${action.label} all ${state} tasks?`,
      body: [
        h("p", { class: "bulk-count" }, `${count(n)} ${state} task${n === 1 ? "" : "s"} in ${queue} will be ${BULK[action.id].done}.`),
        h("p", null, action.explain),
      ],
      confirmLabel: `${action.label} ${count(n)} task${n === 1 ? "" : "s"}`,
      danger: action.danger,
    });
    if (!ok) return;
    let res;
    try {
      res = await api.admin("BulkTaskAction", { queue, state: stateWire(state), action: BULK[action.id].wire });
    } catch (err) {
      messages.error(err);
      return;
    }
    lastData = "";
    await load();
    const done = toNum(res.affected);
    messages.info(`${action.label} all: ${count(done)} task${done === 1 ? "" : "s"} ${BULK[action.id].done}.`);
  }

  async function load() {
    renderStateNav();
    renderBulkBar();
    if (!q.queue) {
      messages.clear();
      pager.replaceChildren();
      const names = store.queues.map((x) => x.name);
      results.replaceChildren(names.length
        ? h("div", { class: "empty" }, h("p", null, "Choose a queue:"),
          h("ul", { class: "queue-links" }, names.map((name) => h("li", null, h("a", { href: href(["tasks"], { queue: name }) }, name)))))
        : h("p", { class: "empty" }, store.loaded ? "No queues yet." : "Loading…"));
      return;
    }
    const seq = ++loadSeq;
    const body = { queue: q.queue, pageSize: q.size, pageToken: q.page };
    if (q.state) body.state = stateWire(q.state);
    let res;
    try {
      res = await api.admin("ListTasks", body);
    } catch (err) {
      if (seq !== loadSeq) return;
      messages.error(err, form);
      if (!lastData) results.replaceChildren();
      return;
    }
    if (seq !== loadSeq) return;
    messages.clear();
    picker.input.removeAttribute("aria-invalid");
    const data = JSON.stringify(res);
    if (data === lastData) return;
    lastData = data;
    nextToken = res.nextPageToken ?? "";
    renderRows(res.tasks ?? []);
    renderPager();
  }

  function renderRows(tasks) {
    if (tasks.length === 0) {
      results.replaceChildren(h("p", { class: "empty" },
        q.page ? "No more tasks on this page." : `No ${q.state ? `${q.state} ` : ""}tasks in ${q.queue}.`));
      return;
    }
    const now = Date.now();
    const columns = columnsFor(q.state, tasks);
    const rows = tasks.map((t) => {
      const state = stateName(t.state);
      return h("tr", { dataset: { taskId: t.id } },
        h("th", { scope: "row" }, h("a", {
          href: href(["tasks", "task"], { id: t.id }), class: "mono", "data-focus-key": `task:${t.id}`,
        }, t.id)),
        h("td", null, t.type),
        h("td", null, stateBadge(state)),
        h("td", { class: "num" }, String(t.priority ?? 0)),
        h("td", { class: "num" }, `${t.retried ?? 0} / ${t.maxRetry ?? 0}`),
        columns.map((c) => columnCell(c, t, now)));
    });
    replaceKeepingFocus(results, table({
      caption: `Tasks in ${q.queue}`,
      className: "data tasks",
      head: ["ID", "Type", "State", { text: "Priority", class: "num" }, { text: "Retried", class: "num" }, ...columns.map(columnHead)],
      rows,
    }));
  }

  function renderPager() {
    const sizeParam = q.size === DEFAULT_PAGE_SIZE ? "" : q.size;
    const go = (page) => ctx.navigate(["tasks"], { queue: q.queue, state: q.state, size: sizeParam, page });
    const buttons = [];
    if (q.page) {
      buttons.push(h("button", { type: "button", class: "button", "data-focus-key": "first", onclick: () => { previous = []; go(""); } }, "First page"));
      buttons.push(h("button", {
        type: "button", class: "button", "data-focus-key": "prev", disabled: previous.length === 0,
        onclick: () => {
          const page = previous.pop() ?? "";
          go(page);
        },
      }, "Previous page"));
    }
    buttons.push(h("button", {
      type: "button", class: "button", "data-focus-key": "next", disabled: !nextToken,
      onclick: () => {
        const stack = [...previous, q.page];
        go(nextToken);
        previous = stack;
      },
    }, "Next page"));
    replaceKeepingFocus(pager, buttons);
  }

  readRoute(initialRoute);
  void load();
  return {
    update(route) {
      readRoute(route);
      return load();
    },
    refresh: load,
    unmount: () => picker.unsubscribe(),
  };
}

// ---------------------------------------------------------------- one task

function taskView(container, ctx, initialRoute) {
  const { api } = ctx;
  let id = initialRoute.params.get("id") ?? "";
  let task = null;
  let lastData = "";
  let lastAttempts = [];
  let deleted = false;
  const messages = messageArea();
  const back = h("a", { class: "back", href: href(["tasks"]) }, "← Tasks");
  const title = h("h1", { tabindex: "-1", class: "task-title" });
  const toolbar = h("div", { class: ["toolbar", "admin-only"], role: "group", "aria-label": "Task actions" });
  const details = h("div", { class: "task-details" });
  container.append(back, h("div", { class: "page-header" }, title), messages.el, toolbar, details);

  const buttons = ACTIONS.map((action) => {
    const button = actionButton(action.label, { class: ["button", action.danger ? "danger" : ""], dataset: { action: action.id } }, () => act(action));
    return { action, button };
  });
  toolbar.append(...buttons.map((b) => b.button));

  async function act(action) {
    if (!task) return;
    const ok = await ctx.confirm({
      title: `${action.label} task?`,
      body: [h("p", null, action.explain), h("p", { class: "mono" }, `${task.id} · ${task.type} · ${stateName(task.state)} in ${task.queue}`)],
      confirmLabel: `${action.label} task`,
      danger: action.danger,
    });
    if (!ok) return;
    try {
      const res = await api.admin(action.method, { id: task.id });
      if (action.id === "delete") {
        deleted = true;
        ctx.notify(`Task ${task.id} deleted.`);
        ctx.navigate(["tasks"], { queue: task.queue });
        return;
      }
      messages.info(`${action.label}: done. The task is now ${stateName(res.task?.state)}.`);
      if (res.task) render(res.task);
    } catch (err) {
      messages.error(err);
      await load();
    }
  }

  async function load() {
    if (deleted) return;
    if (!id) {
      messages.error("No task id in the address.");
      return;
    }
    try {
      const res = await api.admin("GetTask", { id });
      render(res.task, res.attempts ?? []);
    } catch (err) {
      if (task) {
        if (err?.code === "NOT_FOUND") {
          messages.error(`${err.message}. It was deleted or purged after its retention.`);
        }
        return; // keep showing the last known state; the banner covers an unreachable node
      }
      title.textContent = `Task ${id}`;
      messages.error(err);
      for (const { button } of buttons) button.disabled = true;
    }
  }

  function render(t, attempts = lastAttempts) {
    if (!t) return;
    lastAttempts = attempts;
    const data = JSON.stringify([t, attempts]);
    if (data === lastData) return;
    lastData = data;
    task = t;
    const state = stateName(t.state);
    back.href = href(["tasks"], { queue: t.queue });
    back.textContent = `← Tasks in ${t.queue}`;
    title.replaceChildren("Task ", h("span", { class: "mono" }, t.id), " ", stateBadge(state));
    document.title = `Task ${t.id} · conveyor`;
    for (const { action, button } of buttons) {
      const allowed = action.states.includes(state);
      button.disabled = !allowed;
      button.title = allowed ? action.explain : `Not available for a ${state} task`;
    }
    const now = Date.now();
    const when = (ms) => (toNum(ms) ? [timestamp(ms), h("span", { class: "muted" }, ` (${relative(ms, now)})`)] : "—");
    const payload = describeBytes(t.payload, t.contentType);
    const result = describeBytes(t.result, "");
    const metadata = Object.entries(t.metadata ?? {});
    details.replaceChildren(...[
      section("Summary", list([
        ["Queue", h("a", { href: href(["tasks"], { queue: t.queue }) }, t.queue)],
        ["Type", t.type],
        ["State", stateBadge(state)],
        ["Priority", String(t.priority ?? 0)],
        ["Attempts", `${toNum(t.retried)} failed of ${toNum(t.maxRetry) + 1} allowed (max retry ${toNum(t.maxRetry)})`],
        ["Created", when(t.createdAtMs)],
        ["Ready at", when(t.readyAtMs)],
        ["Finished", when(t.finishedAtMs)],
        t.cancelReason ? ["Cancel reason", t.cancelReason] : null,
      ])),
      section("Keys", list([
        ["Concurrency key", t.concurrencyKey || "—", "mono"],
        ["Unique key", t.uniqueKey || "—", "mono"],
        ["Group", t.group || "—", "mono"],
      ])),
      section("Limits and lease", list([
        ["Timeout per attempt", duration(t.timeoutMs)],
        ["Deadline", when(t.deadlineAtMs)],
        ["Expires if not dispatched", when(t.expiresAtMs)],
        ["Retention when completed", duration(t.retentionMs)],
        ["Lease", t.leaseId || "—", "mono"],
        ["Lease expires", when(t.leaseExpiresAtMs)],
        ["Held by worker", t.leaseWorkerId ? h("a", { href: href(["workers"]) }, t.leaseWorkerId) : "—", "mono"],
        ["Held since", when(t.leasedAtMs)],
      ])),
      section("Last error", t.lastError
        ? [h("pre", { class: "code error-text" }, t.lastError), lastStack(attempts), h("p", { class: "muted" }, "Failed at ", when(t.lastFailedAtMs))]
        : h("p", { class: "muted" }, "No failed attempt.")),
      section("Attempts", attemptsTable(attempts, when), "wide"),
      section(`Payload`, bytesBlock(payload, t.contentType), "wide"),
      result.kind !== "empty" ? section("Result", bytesBlock(result, ""), "wide") : null,
      section("Metadata", metadata.length
        ? table({ caption: "Metadata", className: "data", head: ["Key", "Value"], rows: metadata.map(([k, v]) => h("tr", null, h("th", { scope: "row", class: "mono" }, k), h("td", { class: "mono" }, v))) })
        : h("p", { class: "muted" }, "None."), "wide"),
    ].filter(Boolean));
  }

  void load();
  return {
    update(route) {
      const next = route.params.get("id") ?? "";
      if (next !== id) {
        id = next;
        task = null;
        lastData = "";
        messages.clear();
      }
      return load();
    },
    refresh: load,
  };
}

/** The task's attempts, oldest first (the node keeps the most recent 25). */
function attemptsTable(attempts, when) {
  if (attempts.length === 0) return h("p", { class: "muted" }, "Not run yet.");
  const took = (a) => {
    if (!toNum(a.startedAtMs)) return "—";
    const ms = toNum(a.endedAtMs) - toNum(a.startedAtMs);
    return ms === 0 ? "0 ms" : duration(ms);
  };
  return table({
    caption: "Attempts",
    className: "data attempts",
    head: [{ text: "#", class: "num" }, "Started", "Took", "Worker", "Outcome", "Error"],
    rows: attempts.map((a) => h("tr", { dataset: { attempt: String(a.number) } },
      h("th", { scope: "row", class: "num" }, String(a.number)),
      h("td", null, when(a.startedAtMs)),
      h("td", null, took(a)),
      h("td", { class: "mono" }, a.workerId || "—"),
      h("td", { class: "outcome" }, a.outcome.replaceAll("_", " ")),
      h("td", { class: "error-text" }, h("span", { class: "error-message" }, a.error ?? ""), a.stack ? stackBlock(a.stack, "Stack") : null))),
  });
}

/** Where the last failure came from: the stack the worker sent with it (a worker of an older SDK sends none). */
function lastStack(attempts) {
  const last = [...attempts].reverse().find((a) => a.stack);
  return last ? h("pre", { class: "code stack", "aria-label": `Stack of attempt ${last.number}` }, last.stack) : null;
}

/** A stack folded away in the attempts table (it is long; the Last error section shows the latest open). */
function stackBlock(stack, label) {
  return h("details", { class: "stack" }, h("summary", null, label), h("pre", { class: "code stack" }, stack));
}

function section(titleText, body, className) {
  const headingId = uid("sec");
  return h("section", { class: ["panel", className], "aria-labelledby": headingId }, h("h2", { id: headingId }, titleText), body);
}

function list(rows) {
  return h("dl", { class: "props" }, rows.filter(Boolean).map(([k, v, cls]) => [h("dt", null, k), h("dd", { class: cls }, v)]));
}

function bytesBlock(view, contentType) {
  const meta = h("p", { class: "muted" }, `${contentType || "no content type"} · ${byteSize(view.size)}${view.kind === "binary" ? " · binary, shown as hex" : view.kind === "json" ? " · JSON, formatted" : ""}`);
  if (view.kind === "empty") return h("p", { class: "muted" }, "Empty.");
  return [meta, h("pre", { class: ["code", view.kind], tabindex: "0", "aria-label": "content" }, view.text)];
}
