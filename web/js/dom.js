// Tiny DOM helpers. Every piece of server data goes in as text, never as HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

function apply(el, props) {
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "text") el.textContent = String(value);
    else if (key === "value" && "value" in el) el.value = String(value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** h("a", { href, class }, "text", child, [more]) */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** The same for SVG elements. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, props);
  append(el, children);
  return el;
}

let nextId = 0;
/** A document-unique id for label/input pairs. */
export function uid(prefix = "id") {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

/**
 * Replaces `parent`'s children, keeping keyboard focus on the element with the same
 * `data-focus-key` (live refreshes must not steal focus from the operator).
 */
export function replaceKeepingFocus(parent, ...children) {
  const active = document.activeElement;
  const key = active && parent.contains(active) ? active.getAttribute("data-focus-key") : null;
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  if (key) {
    const again = [...parent.querySelectorAll("[data-focus-key]")].find((el) => el.getAttribute("data-focus-key") === key);
    if (again) again.focus({ preventScroll: true });
  }
}

/** A label + control pair. */
export function field(labelText, control, hint) {
  const id = control.id || uid("f");
  control.id = id;
  const hintEl = hint ? h("span", { class: "hint", id: `${id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: id }, labelText), control, hintEl);
}

/** A table inside a horizontally scrollable wrapper (narrow windows). */
export function table({ caption, head, rows, className }) {
  return h("div", { class: "table-wrap" },
    h("table", { class: className },
      caption ? h("caption", { class: "visually-hidden" }, caption) : null,
      h("thead", null, h("tr", null, head.map((c) => (typeof c === "string"
        ? h("th", { scope: "col" }, c)
        : h("th", { scope: "col", class: c.class }, c.text))))),
      h("tbody", null, rows)));
}
