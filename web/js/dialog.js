// Confirmation dialogs on the native <dialog> (modal: focus is trapped inside, Escape
// cancels); focus returns to whatever had it before, or to its replacement when a live
// refresh re-rendered it meanwhile (same data-focus-key). Navigating away (the Back
// button, a typed or scripted #/route) cancels an open dialog: it asked about a view
// that is no longer on screen.

import { h, uid } from "./dom.js";

/**
 * Resolves true when the operator confirms. The safe choice (Cancel) has the focus.
 * @param {{ title: string, body: string | Node | (string|Node)[], confirmLabel: string, danger?: boolean }} options
 */
export function confirmDialog({ title, body, confirmLabel, danger = false }) {
  const previous = document.activeElement;
  const titleId = uid("dlg-title");
  const bodyId = uid("dlg-body");
  const dialog = h("dialog", { class: "dialog", "aria-labelledby": titleId, "aria-describedby": bodyId },
    h("form", { method: "dialog" },
      h("h2", { id: titleId }, title),
      h("div", { id: bodyId, class: "dialog-body" }, body),
      h("div", { class: "dialog-actions" },
        h("button", { type: "submit", value: "cancel", class: "button", autofocus: true }, "Cancel"),
        h("button", { type: "submit", value: "confirm", class: ["button", danger ? "danger" : "primary"] }, confirmLabel))));
  document.body.append(dialog);
  return new Promise((resolve) => {
    const onNavigate = () => dialog.close("cancel");
    window.addEventListener("hashchange", onNavigate);
    dialog.addEventListener("close", () => {
      window.removeEventListener("hashchange", onNavigate);
      const confirmed = dialog.returnValue === "confirm";
      dialog.remove();
      restoreFocus(previous);
      resolve(confirmed);
    }, { once: true });
    dialog.showModal();
  });
}

function restoreFocus(previous) {
  if (!(previous instanceof HTMLElement)) return;
  if (previous.isConnected) {
    previous.focus();
    return;
  }
  const key = previous.getAttribute("data-focus-key");
  const again = key && [...document.querySelectorAll("[data-focus-key]")].find((el) => el.getAttribute("data-focus-key") === key);
  if (again) again.focus();
}
