// Strategies: the concurrency rules of task types (CEL key, limit, strategy; chained in
// order) — list them, set a type's rules with a small rule builder, and clear them.

import { field, h, replaceKeepingFocus, uid } from "../dom.js";
import { count, timestamp } from "../format.js";
import { clearInvalid, messageArea, pageHeader } from "../ui.js";
import { registerTab } from "./registry.js";

/** LimitStrategy (task.proto), in enum order. */
const STRATEGIES = [
  { value: "LIMIT_STRATEGY_GROUP_ROUND_ROBIN", name: "GROUP_ROUND_ROBIN", explain: "Queue runs beyond the limit; serve keys in turn as slots free." },
  { value: "LIMIT_STRATEGY_CANCEL_IN_PROGRESS", name: "CANCEL_IN_PROGRESS", explain: "The newest run preempts: cancel the key's oldest runs, running or queued." },
  { value: "LIMIT_STRATEGY_CANCEL_NEWEST", name: "CANCEL_NEWEST", explain: "Cancel a new run when its key already has max runs." },
  { value: "LIMIT_STRATEGY_CANCEL_QUEUED_EXCEPT_NEWEST", name: "CANCEL_QUEUED_EXCEPT_NEWEST", explain: "Run up to max; of the runs queued beyond, keep the newest and cancel the rest." },
  { value: "LIMIT_STRATEGY_CANCEL_QUEUED_EXCEPT_OLDEST", name: "CANCEL_QUEUED_EXCEPT_OLDEST", explain: "Run up to max; of the runs queued beyond, keep the oldest and cancel the rest." },
];
const strategyOf = (value) => STRATEGIES.find((s) => s.value === value);
const UINT32_MAX = 4_294_967_295;

registerTab({
  id: "strategies",
  title: "Strategies",
  order: 70,
  mount(container, ctx) {
    const { api } = ctx;
    const messages = messageArea();
    const typesId = uid("types");
    const typeList = h("datalist", { id: typesId });
    const typeInput = h("input", {
      type: "text", name: "type", list: typesId, autocomplete: "off", spellcheck: "false", "data-field": "type",
      value: ctx.route.params.get("type") ?? "",
    });
    const rulesBox = h("div", { class: "rules" });
    const addButton = h("button", { type: "button", class: "button" }, "Add a rule");
    const form = h("form", { class: ["rules-form", "admin-only"], novalidate: true, "aria-label": "Set the concurrency rules of a task type" },
      h("div", { class: "inline-form" }, field("Task type", typeInput, "its rules are replaced by the ones below"), typeList),
      rulesBox,
      h("div", { class: "form-actions" }, addButton, h("button", { type: "submit", class: "button primary" }, "Set rules")));
    const listHeading = h("h2", { tabindex: "-1" }, "Rules by task type");
    const tableBox = h("div");
    container.append(
      pageHeader("Concurrency strategies",
        "A task type's rules limit how many of its tasks run at once per key. The key is a CEL expression over the payload (input) and metadata (additional_metadata); the limit is a number or a CEL expression; the strategy says what happens at the limit. Rules chain: a task needs a slot under every rule, in order. Changes apply to tasks enqueued afterwards."),
      h("section", { class: "panel" }, h("h2", null, "Set a type's rules"), form, messages.el),
      h("section", { class: "panel" }, listHeading, tableBox));

    // ------------------------------------------------------------ the rule builder

    /** One editor per rule, in chain order. */
    let editors = [];

    function ruleEditor(rule) {
      const text = (name, extra) => h("input", { type: "text", name, autocomplete: "off", spellcheck: "false", ...extra });
      const expression = text("expression", { class: "code-input", placeholder: "input.user_id" });
      const maxRuns = text("max-runs", { class: "code-input", placeholder: "2  or  input.tier == 'premium' ? 10 : 1" });
      const strategy = h("select", { name: "strategy" }, STRATEGIES.map((s) => h("option", { value: s.value }, s.name)));
      const name = text("rule-name", { placeholder: "optional" });
      const legend = h("legend");
      const strategyField = field("Strategy", strategy, STRATEGIES[0].explain);
      const strategyHint = strategyField.querySelector(".hint");
      const explain = () => {
        strategyHint.textContent = strategyOf(strategy.value)?.explain ?? "";
      };
      strategy.addEventListener("change", explain);
      const hidden = () => h("span", { class: "visually-hidden" });
      const up = h("button", { type: "button", class: "button" }, "Move up", hidden());
      const down = h("button", { type: "button", class: "button" }, "Move down", hidden());
      const remove = h("button", { type: "button", class: "button danger" }, "Remove", hidden());
      const el = h("fieldset", { class: "rule" }, legend,
        h("div", { class: "rule-fields" },
          field("Key expression", expression, "CEL, e.g. input.user_id or 'global'"),
          field("Max runs", maxRuns, "per key: a number or a CEL expression"),
          strategyField,
          field("Name", name, "optional: rules with one name share one budget")),
        h("div", { class: "rule-actions" }, up, down, remove));
      const editor = { el, legend, expression, maxRuns, strategy, name, up, down, remove };
      up.addEventListener("click", () => move(editor, -1, up, down));
      down.addEventListener("click", () => move(editor, 1, down, up));
      remove.addEventListener("click", () => removeRule(editor));
      if (rule) {
        expression.value = rule.expression ?? "";
        maxRuns.value = rule.maxRunsExpression || (rule.maxRuns ? String(rule.maxRuns) : "");
        if (strategyOf(rule.strategy)) strategy.value = rule.strategy;
        name.value = rule.name ?? "";
      }
      explain();
      return editor;
    }

    /** Numbers the rules and names their fields as the server does (rules[0].expression …). */
    function renumber() {
      rulesBox.replaceChildren(...editors.map((e) => e.el));
      editors.forEach((e, i) => {
        const n = i + 1;
        e.legend.textContent = `Rule ${n}`;
        e.expression.dataset.field = `rules[${i}].expression`;
        e.maxRuns.dataset.field = `rules[${i}].max_runs`;
        e.strategy.dataset.field = `rules[${i}].strategy`;
        e.name.dataset.field = `rules[${i}].name`;
        for (const b of [e.up, e.down, e.remove]) b.lastChild.textContent = ` rule ${n}`;
        e.up.disabled = i === 0;
        e.down.disabled = i === editors.length - 1;
        e.remove.disabled = editors.length === 1;
      });
    }

    function setRules(rules) {
      editors = (rules.length ? rules : [undefined]).map(ruleEditor);
      renumber();
    }

    function move(editor, by, button, other) {
      const i = editors.indexOf(editor);
      const j = i + by;
      if (j < 0 || j >= editors.length) return;
      [editors[i], editors[j]] = [editors[j], editors[i]];
      renumber();
      (button.disabled ? other : button).focus();
    }

    function removeRule(editor) {
      const i = editors.indexOf(editor);
      if (i < 0 || editors.length === 1) return;
      editors.splice(i, 1);
      renumber();
      (editors[i] ?? editors[i - 1]).expression.focus();
    }

    addButton.addEventListener("click", () => {
      const editor = ruleEditor();
      editors.push(editor);
      renumber();
      editor.expression.focus();
    });

    /** The rules of the form on the wire, or an error (with the input at fault marked). */
    function readRules() {
      return editors.map((e, i) => {
        const rule = { name: e.name.value.trim(), expression: e.expression.value.trim(), strategy: e.strategy.value };
        const max = e.maxRuns.value.trim();
        if (/^[+-]?\d+(\.\d*)?$/.test(max) || max === "") {
          const n = max === "" ? 0 : Number(max);
          e.maxRuns.dataset.field = `rules[${i}].max_runs`;
          if (!Number.isInteger(n) || n < 0 || n > UINT32_MAX) {
            e.maxRuns.setAttribute("aria-invalid", "true");
            e.maxRuns.focus();
            throw new Error(`rules[${i}].max_runs: must be a whole number of at least 1 or a CEL expression, got ${max}`);
          }
          rule.maxRuns = n;
        } else {
          e.maxRuns.dataset.field = `rules[${i}].max_runs_expression`;
          rule.maxRunsExpression = max;
        }
        return rule;
      });
    }

    /** The server's message, plus where that rule is in the form (it counts from 0). */
    function showError(err) {
      messages.error(err, form);
      const at = /^rules\[(\d+)\]/.exec(typeof err === "string" ? err : err?.field ?? "");
      const alert = messages.el.querySelector(".alert");
      if (at && alert && editors[Number(at[1])]) alert.append(h("span", { class: "muted" }, ` (rule ${Number(at[1]) + 1} in the form)`));
    }

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearInvalid(form);
      const type = typeInput.value.trim();
      let rules;
      try {
        rules = readRules();
      } catch (err) {
        showError(err.message);
        return;
      }
      const existing = types.find((t) => t.type === type);
      if (existing) {
        const ok = await ctx.confirm({
          title: `Replace the rules of ${type}?`,
          body: [
            h("p", null, `${type} has ${ruleCount(existing.rules.length)}, set by ${existing.source || "unknown"} on ${timestamp(existing.updatedAtMs)}. `
              + `The ${ruleCount(rules.length)} of the form replace them for tasks enqueued from now on.`),
            existing.source === "worker" ? h("p", null, `A worker that declares rules for ${type} sets its own again when it registers.`) : null,
          ],
          confirmLabel: "Replace rules",
        });
        if (!ok) return;
      }
      try {
        const res = await api.admin("SetStrategies", { type, rules });
        const n = res.rules?.rules?.length ?? rules.length;
        messages.info(`Type ${type}: ${ruleCount(n)} set; they apply to tasks enqueued from now on.`);
        await load();
      } catch (err) {
        showError(err);
      }
    });

    // ------------------------------------------------------------ the list

    /** The last ListStrategies answer. */
    let types = [];

    async function clear(t) {
      const ok = await ctx.confirm({
        title: `Clear the concurrency rules of ${t.type}?`,
        body: [
          h("p", null, `Tasks of ${t.type} enqueued from now on are not limited by these ${ruleCount(t.rules.length)}; tasks already enqueued keep the rules they were enqueued with.`),
          t.source === "worker" ? h("p", null, `They came from a worker: a worker that declares rules for ${t.type} sets them again when it registers.`) : null,
        ],
        confirmLabel: "Clear rules",
        danger: true,
      });
      if (!ok) return;
      try {
        await api.admin("DeleteStrategies", { type: t.type });
        messages.info(`Type ${t.type}: concurrency rules removed.`);
        await load();
        // The type's row (and the button that had the focus) is gone: keep the keyboard here.
        if (!container.contains(document.activeElement)) listHeading.focus();
      } catch (err) {
        messages.error(err);
      }
    }

    function edit(t) {
      clearInvalid(form);
      typeInput.value = t.type;
      setRules(t.rules);
      editors[0].expression.focus();
      editors[0].expression.select();
    }

    function maxRunsCell(r) {
      return r.maxRunsExpression
        ? h("td", { class: "code", dataset: { col: "max-runs" } }, r.maxRunsExpression)
        : h("td", { class: "count", dataset: { col: "max-runs" } }, count(r.maxRuns));
    }

    let lastData = "";
    async function load() {
      let res;
      try {
        res = await api.admin("ListStrategies", {});
      } catch (err) {
        if (!lastData) tableBox.replaceChildren(h("p", { class: "empty" }, "Could not load the concurrency rules."));
        if (err?.name !== "UnreachableError") messages.error(err);
        return;
      }
      const data = JSON.stringify(res);
      if (data === lastData) return;
      lastData = data;
      types = res.types ?? [];
      typeList.replaceChildren(...types.map((t) => h("option", { value: t.type })));
      if (types.length === 0) {
        tableBox.replaceChildren(h("p", { class: "empty" },
          "No concurrency rules: no task type is limited. Set some above, with ", h("code", null, "conveyor strategy set"),
          ", or next to a handler (", h("code", null, "mux.handle(type, fn, { concurrency: [...] })"), ")."));
        return;
      }
      const groups = types.map((t) => {
        const n = t.rules.length || 1;
        const span = (cell) => {
          cell.rowSpan = n;
          return cell;
        };
        const rows = (t.rules.length ? t.rules : [undefined]).map((r, i) => h("tr", { dataset: { rule: String(i) } },
          i === 0 ? span(h("th", { scope: "rowgroup", class: "mono" }, t.type)) : null,
          h("td", { class: "num" }, String(i + 1)),
          h("td", { class: "mono", dataset: { col: "name" } }, r?.name || h("span", { class: "muted" }, "—")),
          h("td", { class: "code", dataset: { col: "expression" } }, r?.expression ?? ""),
          r ? maxRunsCell(r) : h("td"),
          h("td", { dataset: { col: "strategy" } }, r ? strategyOf(r.strategy)?.name ?? r.strategy : ""),
          i === 0 ? span(h("td", { dataset: { col: "source" } }, h("span", { class: `badge source-${t.source}` }, t.source || "?"))) : null,
          i === 0 ? span(h("td", { dataset: { col: "updated" } }, timestamp(t.updatedAtMs))) : null,
          i === 0 ? span(h("td", { class: "actions-cell" }, h("div", { class: "actions" },
            h("button", { type: "button", class: ["button", "admin-only"], "data-focus-key": `edit:${t.type}`, onclick: () => edit(t) },
              "Edit", h("span", { class: "visually-hidden" }, ` rules of ${t.type}`)),
            h("button", { type: "button", class: ["button", "danger", "admin-only"], "data-focus-key": `clear:${t.type}`, onclick: () => clear(t) },
              "Clear", h("span", { class: "visually-hidden" }, ` rules of ${t.type}`))))) : null));
        return h("tbody", { dataset: { type: t.type } }, rows);
      });
      replaceKeepingFocus(tableBox, h("div", { class: "table-wrap" },
        h("table", { class: "data strategies" },
          h("caption", { class: "visually-hidden" }, "Concurrency rules of each task type, in chain order"),
          h("thead", null, h("tr", null,
            ["Type", { text: "#", class: "num" }, "Name", "Key expression", "Max runs", "Strategy", "Set by", "Updated", "Actions"]
              .map((c) => (typeof c === "string" ? h("th", { scope: "col" }, c) : h("th", { scope: "col", class: c.class }, c.text))))),
          groups)));
    }

    setRules([]);
    void load();
    return { refresh: load };
  },
});

function ruleCount(n) {
  return n === 1 ? "1 rule" : `${n} rules`;
}
