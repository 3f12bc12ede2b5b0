// The dashboard's token, for a node with authentication: asked for once a call is refused
// with 401, kept in sessionStorage (this tab only, gone when it closes), sent as an
// Authorization header and never put in a URL.

import { h } from "./dom.js";

const KEY = "conveyor.token";

export function authHeaders() {
  const token = sessionStorage.getItem(KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
}

/**
 * Hides what the token cannot do: without the admin role, every element marked
 * `admin-only` (actions, set forms) is hidden. The node refuses those calls anyway.
 */
export async function applyRole() {
  try {
    const res = await fetch("/auth/whoami", { headers: authHeaders(), cache: "no-store" });
    if (!res.ok) return; // 401: the first API call asks for a token
    const me = await res.json();
    if (!me.roles.includes("admin")) document.body.dataset.readOnly = "";
    const el = document.getElementById("identity");
    // A token scoped to queue patterns sees only those queues: say so, or empty lists would puzzle.
    const scope = Array.isArray(me.queues) ? `; queues ${me.queues.join(", ")}` : "";
    if (el && me.auth) el.textContent = `${me.name} (${me.roles.join(", ")}${scope})`;
  } catch {
    // unreachable: the banner says so; roles are read again on the next load
  }
}

let asking = false;

/** Shows the token form (once); `message` is the node's reason (no token, unknown token). */
export function askForToken(message) {
  if (asking) return;
  asking = true;
  const input = h("input", { type: "password", id: "token-input", name: "token", autocomplete: "off", required: true });
  const form = h("form", { class: "token-form", id: "token-form" },
    h("h2", null, "This node requires a token"),
    h("p", null, message),
    h("label", { for: "token-input" }, "Token"),
    input,
    h("button", { type: "submit", class: "button primary" }, "Use token"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    location.reload();
  });
  document.body.append(h("div", { class: "token-overlay", role: "dialog", "aria-modal": "true" }, form));
  input.focus();
}
