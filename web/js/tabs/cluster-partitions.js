// The Cluster tab's partitions: a one-line tally, a filter and a table of one page of 64
// partitions. A cluster has 64 partitions by default and up to 4096, so the table pages
// instead of growing: 64 rows is one page, and 4096 stay light because only the page shown
// is in the DOM and it is redrawn only when the records change (epochs move on claims,
// not on every poll).

import { h, replaceKeepingFocus, table } from "../dom.js";
import { count, toNum } from "../format.js";

export const PAGE_SIZE = 64;

/** The state a partition is in for an operator: the recorded one, or "owner down". */
export function partitionState(p) {
  return p.ownerDown ? "owner down" : (p.state || "unclaimed");
}

/**
 * Filters of the table, by `partitions=` in the hash. "moved" names the partitions whose
 * holder is not the node the placement would give them now (its pin, else the ring over
 * the members not drained): they stay where they are until a handoff moves them (a claim
 * never takes a partition from a live holder). "pinned" names those an operator moved.
 */
const FILTERS = [
  { id: "", label: "All partitions", keep: () => true },
  { id: "down", label: "Waiting for a down node", keep: (p) => p.ownerDown },
  { id: "unclaimed", label: "Unclaimed", keep: (p) => partitionState(p) === "unclaimed" },
  { id: "released", label: "Released", keep: (p) => partitionState(p) === "released" },
  { id: "moved", label: "Held off their desired owner", keep: (p, ringOwner) => Boolean(p.owner) && p.owner !== ringOwner },
  { id: "pinned", label: "Pinned by an operator", keep: (p) => Boolean(p.pinnedTo) },
];

function filterFor(id) {
  if (id.startsWith("node:")) {
    const node = id.slice(5);
    return { id, label: `Held by ${node}`, keep: (p) => p.owner === node };
  }
  return FILTERS.find((f) => f.id === id) ?? FILTERS[0];
}

/** "held by n1 40, n2 20 · 4 unclaimed · 1 waiting for a down node · 2 pinned" */
function tally(states) {
  const held = new Map();
  const other = { released: 0, unclaimed: 0, "owner down": 0 };
  for (const p of states) {
    const state = partitionState(p);
    if (state === "owned") held.set(p.owner, (held.get(p.owner) ?? 0) + 1);
    else other[state] = (other[state] ?? 0) + 1;
  }
  const parts = [];
  if (held.size) parts.push(`held by ${[...held].sort(([a], [b]) => a.localeCompare(b)).map(([node, n]) => `${node} ${count(n)}`).join(", ")}`);
  if (other.unclaimed) parts.push(`${count(other.unclaimed)} unclaimed (claimed on first use)`);
  if (other.released) parts.push(`${count(other.released)} released`);
  if (other["owner down"]) parts.push(`${count(other["owner down"])} waiting for a down node`);
  const pinned = states.filter((p) => p.pinnedTo).length;
  if (pinned) parts.push(`${count(pinned)} pinned`);
  return `${count(states.length)} partitions: ${parts.join(" · ") || "none recorded yet"}`;
}

const BADGE = { owned: "partition-owned", released: "partition-released", unclaimed: "partition-unclaimed", "owner down": "partition-down" };

/**
 * The panel. `go(params)` changes the hash (filter, page) so a view is linkable;
 * show(status) draws a GetClusterStatus answer; setRoute(route) reads the hash.
 */
export function partitionsPanel(go) {
  const summary = h("p", { class: "partition-tally", dataset: { partitionTally: "" } });
  const select = h("select", { id: "partition-filter", name: "partitions" });
  select.addEventListener("change", () => go({ partitions: select.value, page: "" }));
  const range = h("p", { class: "hint", "aria-live": "polite" });
  const tableBox = h("div");
  const pager = h("div", { class: "pager" });
  const el = h("section", { class: "panel", "aria-labelledby": "partitions-h" },
    h("div", { class: "panel-head" },
      h("h2", { id: "partitions-h" }, "Partitions"),
      h("div", { class: "inline-field" }, h("label", { for: select.id }, "Show"), select)),
    summary, tableBox, range, pager);

  let status = null;
  let filterId = "";
  let page = 1;
  let drawn = "";

  function draw() {
    if (!status) return;
    const states = status.partitionStates ?? [];
    const owners = status.partitionOwners ?? [];
    const members = (status.members ?? []).map((m) => m.nodeId);
    const filter = filterFor(filterId);

    const options = [...FILTERS, ...members.map((node) => ({ id: `node:${node}`, label: `Held by ${node}` }))];
    if (!options.some((o) => o.id === filter.id)) options.push(filter); // a node from a link that has left
    const wanted = JSON.stringify(options.map((o) => [o.id, o.label]));
    if (select.dataset.options !== wanted) {
      select.replaceChildren(...options.map((o) => h("option", { value: o.id }, o.label)));
      select.dataset.options = wanted;
    }
    select.value = filter.id;

    const kept = states.filter((p) => filter.keep(p, owners[p.partition] ?? ""));
    const pages = Math.max(1, Math.ceil(kept.length / PAGE_SIZE));
    const current = Math.min(Math.max(1, page), pages);
    const shown = kept.slice((current - 1) * PAGE_SIZE, current * PAGE_SIZE);
    // Redraw only what changed: a page of 64 rows, not every poll.
    const key = JSON.stringify([filter.id, current, kept.length, shown, shown.map((p) => owners[p.partition])]);
    summary.textContent = tally(states);
    if (key === drawn) return;
    drawn = key;

    if (states.length === 0) {
      tableBox.replaceChildren(h("p", { class: "empty" }, "The node has not read the partition records yet."));
    } else if (kept.length === 0) {
      tableBox.replaceChildren(h("p", { class: "empty" }, `No partition: ${filter.label.toLowerCase()}.`));
    } else {
      replaceKeepingFocus(tableBox, table({
        caption: "Partitions: who holds each, at which epoch, its pin (conveyor cluster move), and who the placement would give it to",
        className: "data partitions",
        head: [{ text: "Partition", class: "num" }, "Held by", { text: "Epoch", class: "num" }, "State", "Pinned to", "Desired owner"],
        rows: shown.map((p) => {
          const state = partitionState(p);
          const ringOwner = owners[p.partition] ?? "";
          return h("tr", { dataset: { partition: String(p.partition) } },
            h("th", { scope: "row", class: "num" }, String(p.partition)),
            h("td", { class: "mono", dataset: { col: "holder" } }, p.owner || "—"),
            h("td", { class: "num", dataset: { col: "epoch" } }, toNum(p.epoch) > 0 ? String(p.epoch) : "—"),
            h("td", { dataset: { col: "state" } }, h("span", { class: `badge ${BADGE[state] ?? ""}` }, state)),
            h("td", { class: "mono", dataset: { col: "pinned" } }, p.pinnedTo || "—"),
            h("td", { class: ["mono", p.owner && ringOwner !== p.owner ? "moved" : ""], dataset: { col: "ring-owner" } }, ringOwner || "—"));
        }),
      }));
    }
    range.textContent = kept.length > PAGE_SIZE
      ? `Partitions ${count((current - 1) * PAGE_SIZE + 1)}–${count((current - 1) * PAGE_SIZE + shown.length)} of ${count(kept.length)} shown, page ${current} of ${pages}.`
      : "";
    const pageButton = (label, to, focusKey) => h("button", {
      type: "button", class: "button", "data-focus-key": focusKey, disabled: to < 1 || to > pages,
      onclick: () => go({ partitions: filter.id, page: to > 1 ? String(to) : "" }),
    }, label);
    replaceKeepingFocus(pager, pages > 1 ? [pageButton("Previous page", current - 1, "prev"), pageButton("Next page", current + 1, "next")] : []);
  }

  return {
    el,
    show(next) {
      status = next;
      draw();
    },
    setRoute(route) {
      filterId = route.params.get("partitions") ?? "";
      page = Math.max(1, Number.parseInt(route.params.get("page") ?? "1", 10) || 1);
      draw();
    },
  };
}
