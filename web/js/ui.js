// Shared view pieces: message areas, state badges, queue pickers.

import { describeError } from "./api.js";
import { h, uid } from "./dom.js";

/** A region that shows the outcome of the operator's last action in words. */
export function messageArea() {
  const el = h("div", { class: "messages" });
  return {
    el,
    /** Shows the server's message (or the unreachable text); marks the field at fault. */
    error(err, form) {
      const text = typeof err === "string" ? err : describeError(err);
      el.replaceChildren(h("p", { class: "alert error", role: "alert" }, h("strong", null, "Error: "), text));
      if (form && err?.field) markField(form, err.field);
    },
    info(text) {
      el.replaceChildren(h("p", { class: "alert info", role: "status" }, text));
    },
    clear() {
      el.replaceChildren();
    },
  };
}

/** Sets aria-invalid on the input named after the server's field ("rate_per_sec" → data-field). */
function markField(form, field) {
  for (const input of form.querySelectorAll("[data-field]")) {
    const match = input.dataset.field === field || field.endsWith(`.${input.dataset.field}`);
    input.toggleAttribute("aria-invalid", match);
    if (match) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  }
}

export function clearInvalid(form) {
  for (const input of form.querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
}

export function stateBadge(state) {
  return h("span", { class: `badge state-${state}` }, state);
}

export function pausedBadge(paused) {
  return paused ? h("span", { class: "badge paused" }, "paused") : h("span", { class: "badge running" }, "running");
}

/** A text input with the known queue names as suggestions (any name can be typed). */
export function queueInput(store, { name = "queue", value = "" } = {}) {
  const listId = uid("queues");
  const list = h("datalist", { id: listId });
  const input = h("input", {
    type: "text", name, list: listId, value, autocomplete: "off", spellcheck: "false", "data-field": "queue",
  });
  const update = () => list.replaceChildren(...store.queues.map((q) => h("option", { value: q.name })));
  update();
  const unsubscribe = store.subscribe(update);
  return { input, list, unsubscribe };
}

/** A button that runs an async action once at a time (disabled while it runs). */
export function actionButton(label, props, action) {
  const button = h("button", { type: "button", class: "button", ...props }, label);
  button.addEventListener("click", async () => {
    if (button.getAttribute("aria-busy") === "true") return;
    button.setAttribute("aria-busy", "true");
    try {
      await action();
    } finally {
      button.removeAttribute("aria-busy");
    }
  });
  return button;
}

/** The view's heading (focus target after navigation) and an optional intro line. */
export function pageHeader(title, intro, ...extra) {
  return h("div", { class: "page-header" },
    h("h1", { tabindex: "-1" }, title),
    intro ? h("p", { class: "intro" }, intro) : null,
    extra);
}
