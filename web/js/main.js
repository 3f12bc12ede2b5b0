// The dashboard shell: nav from the tab registry, hash routing, the 2-second live poll,
// the "cannot reach the node" banner and toasts.

import * as api from "./api.js";
import { applyRole } from "./auth.js";
import { confirmDialog } from "./dialog.js";
import { h } from "./dom.js";
import { clock } from "./format.js";
import { href, navigate, parseHash } from "./router.js";
import { NodeStore, POLL_MS } from "./store.js";
import { allTabs, tabById } from "./tabs/registry.js";
import "./tabs/index.js";

const DEFAULT_TAB = "overview";

const store = new NodeStore();
const main = document.getElementById("main");
const banner = document.getElementById("conn-banner");
const liveStatus = document.getElementById("live-status");
const toasts = document.getElementById("toasts");

let current = null; // { tab, controller }
let lastOkAt = null;

function notify(text, kind = "info") {
  const toast = h("p", { class: `toast ${kind}` }, text);
  toasts.append(toast);
  setTimeout(() => toast.remove(), 6_000);
}

function context(route) {
  return { route, store, api, navigate, href, confirm: confirmDialog, notify };
}

function renderNav(activeId) {
  const list = document.getElementById("tab-list");
  list.replaceChildren(...allTabs().map((tab) => h("li", null,
    h("a", { href: href([tab.id]), "aria-current": tab.id === activeId ? "page" : false, dataset: { tab: tab.id } }, tab.title))));
}

function route(fromUser) {
  const r = parseHash();
  const tab = tabById(r.tab);
  if (!tab) {
    navigate([DEFAULT_TAB], {}, { replace: true });
    return;
  }
  if (current?.tab === tab && current.controller?.update) {
    current.controller.update(r);
  } else {
    current?.controller?.unmount?.();
    const container = h("div", { class: "view", dataset: { view: tab.id } });
    main.replaceChildren(container);
    current = { tab, controller: null };
    current.controller = tab.mount(container, context(r)) ?? {};
    if (fromUser) {
      const heading = container.querySelector("h1");
      if (heading) {
        heading.tabIndex = -1;
        heading.focus({ preventScroll: true });
      }
    }
  }
  document.title = `${tab.title} · conveyor`;
  renderNav(tab.id);
}

function showReachability(reachable) {
  if (reachable) {
    if (!banner.hidden) notify("Connection to the node restored.");
    banner.hidden = true;
    banner.replaceChildren();
    return;
  }
  banner.replaceChildren(
    h("strong", null, "Cannot reach the node"),
    ` at ${location.host}. The dashboard keeps retrying every ${POLL_MS / 1000} s`,
    lastOkAt ? `; the data shown is from ${clock(lastOkAt)}.` : ".");
  banner.hidden = false;
}

async function loadNodeName() {
  try {
    const res = await fetch("/healthz", { cache: "no-store" });
    const health = await res.json();
    const el = document.getElementById("node-name");
    el.textContent = health.node ? `node ${health.node}` : "";
  } catch {
    // shown again on the next reconnect
  }
}

async function tick() {
  try {
    try {
      await store.refresh();
      lastOkAt = new Date();
      liveStatus.textContent = `Live · updated ${clock(lastOkAt)}`;
      liveStatus.removeAttribute("title");
      liveStatus.classList.remove("stale");
    } catch (err) {
      if (!(err instanceof api.ApiError)) throw err;
      // The node answered but could not list every queue: in a cluster, a member that just
      // died fails the merged ListQueues until its lease ends. The view still refreshes, so
      // the Cluster tab shows what is wrong while it is wrong.
      liveStatus.textContent = lastOkAt ? `Queues not listed · last update ${clock(lastOkAt)}` : "Queues not listed";
      liveStatus.title = err.message;
      liveStatus.classList.add("stale");
    }
    await current?.controller?.refresh?.();
  } catch (err) {
    if (!(err instanceof api.UnreachableError)) console.error(err);
    liveStatus.textContent = lastOkAt ? `Offline · last update ${clock(lastOkAt)}` : "Offline";
    liveStatus.classList.add("stale");
  } finally {
    setTimeout(tick, POLL_MS);
  }
}

api.onReachability((reachable) => {
  showReachability(reachable);
  if (reachable) void loadNodeName();
});

document.querySelector(".skip-link").addEventListener("click", (event) => {
  event.preventDefault();
  (main.querySelector("h1") ?? main).focus();
});

window.addEventListener("hashchange", () => route(true));
route(false);
void applyRole();
void loadNodeName();
void tick();
