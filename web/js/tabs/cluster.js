// Cluster: what `conveyor cluster status --partitions` prints — the answering node and its
// phase, etcd's health, the changelog's health, the members (GetClusterStatus with lease times; drained ones
// marked) and every partition with its pin (cluster-partitions.js) — with a warning when
// partitions wait for a node that is down, and a note naming drained nodes. Read-only:
// reader tokens see it all (drain and move are the CLI's).

import { h, replaceKeepingFocus, table } from "../dom.js";
import { count, relative, toNum } from "../format.js";
import { messageArea, pageHeader } from "../ui.js";
import { partitionsPanel } from "./cluster-partitions.js";
import { registerTab } from "./registry.js";

/** "MEMBER_STATE_ACTIVE" → "active" (the JSON API sends enum names). */
const memberState = (wire) => (typeof wire === "string" ? wire.replace(/^MEMBER_STATE_/, "").toLowerCase() : "?");

/** The etcd line: "default (etcd 2/3 healthy; down: http://…)", or the single-node words. */
function clusterText(status) {
  if (!status.clustered) return "single node (no cluster_etcd)";
  const etcd = status.etcd ?? [];
  const down = etcd.filter((e) => !e.healthy).map((e) => e.endpoint);
  return `${status.clusterName} (etcd ${etcd.length - down.length}/${etcd.length} healthy${down.length ? `; not answering: ${down.join(", ")}` : ""})`;
}

/**
 * The changelog line, as `conveyor cluster status` prints it: the stream and its leader
 * (or why the log did not answer), and this node's warm copies with the entries they have
 * still to apply; "off" without cluster_nats (a crashed node's partitions then wait for it).
 */
function changelogText(status) {
  const log = status.changelog;
  if (!log?.enabled) return "off (no cluster_nats: a crashed node's partitions wait for it)";
  const health = log.healthy ? `${log.stream}, leader ${log.leader}` : `${log.stream}, not answering: ${log.error}`;
  const copies = toNum(log.standbyPartitions);
  const standby = copies ? `standby for ${count(log.standbyPartitions)} partitions, ${count(log.standbyLagEntries ?? 0)} entries behind` : "standby for no partition";
  return `${health}; ${standby}`;
}

function phaseText(status) {
  return `${status.phase}${status.serving ? "" : " (not serving writes)"}${status.fences ? `, fenced ${status.fences}× since start` : ""}`;
}

/** Name/value pairs as a definition list; each value is findable by data-fact. */
function facts(pairs) {
  return h("dl", { class: "props cluster-facts" },
    pairs.map(([key, label, value]) => [h("dt", null, label), h("dd", { dataset: { fact: key } }, value)]));
}

/** The warning when partitions wait for down nodes, naming them (as the CLI does). */
function ownerDownWarning(status) {
  const down = (status.partitionStates ?? []).filter((p) => p.ownerDown);
  if (down.length === 0) return null;
  const nodes = [...new Set(down.map((p) => p.owner))].sort();
  return h("div", { class: "alert warn", role: "alert", dataset: { ownerDown: nodes.join(",") } },
    h("strong", null, "Warning: "),
    `${count(down.length)} partition${down.length === 1 ? "" : "s"} wait${down.length === 1 ? "s" : ""} for ${nodes.length === 1 ? "node" : "nodes"} `,
    nodes.map((n, i) => [i ? ", " : "", h("code", null, n)]),
    `, which ${nodes.length === 1 ? "is" : "are"} down. Their queues answer OWNER_DOWN until ${nodes.length === 1 ? "that node comes" : "those nodes come"} back with ${nodes.length === 1 ? "its" : "their"} data directory; no other node serves them empty.`);
}

/** The note naming drained nodes (members or not): they own nothing until undrained. */
function drainedNote(status) {
  const drained = status.drainedNodes ?? [];
  if (drained.length === 0) return null;
  return h("div", { class: "alert info", dataset: { drained: drained.join(",") } },
    h("strong", null, "Drained: "),
    drained.map((n, i) => [i ? ", " : "", h("code", null, n)]),
    `. ${drained.length === 1 ? "It keeps" : "They keep"} serving forwarded calls but ${drained.length === 1 ? "owns" : "own"} no partition until undrained (`,
    h("code", null, "conveyor cluster drain NODE --undo"), ").");
}

function membersTable(status) {
  const members = status.members ?? [];
  if (members.length === 0) return h("p", { class: "empty" }, "No members yet: the node is still registering.");
  return table({
    caption: "Members",
    className: "data members",
    head: ["Node", "State", "Incarnation", { text: "Lease left", class: "num" }, { text: "Partitions", class: "num" }, "gRPC", "HTTP", "Version", ""],
    rows: members.map((m) => {
      const lease = toNum(m.leaseLeftMs);
      return h("tr", { dataset: { member: m.nodeId } },
        h("th", { scope: "row", class: "mono" }, m.nodeId),
        h("td", { dataset: { col: "state" } }, h("span", { class: `badge member-${memberState(m.state)}` }, memberState(m.state)),
          m.drained ? [" ", h("span", { class: "badge member-drained", title: "drained by an operator: owns no partition" }, "drained")] : null),
        // Eight characters tell registrations apart; the whole id is in the tooltip.
        h("td", { class: "mono", dataset: { col: "incarnation" }, title: m.incarnation || false }, m.incarnation ? m.incarnation.slice(0, 8) : "—"),
        h("td", { class: "num", dataset: { col: "lease" } }, lease >= 0 ? `${Math.round(lease / 1000)} s` : "—"),
        h("td", { class: "num", dataset: { col: "owns" } }, count(m.partitionsOwned)),
        h("td", { class: "mono", dataset: { col: "grpc" } }, m.grpcAddress || "—"),
        h("td", { class: "mono", dataset: { col: "http" } }, m.httpAddress || "—"),
        h("td", { dataset: { col: "version" } }, m.version || "—"),
        h("td", { dataset: { col: "self" } }, m.self ? h("span", { class: "badge self" }, "this node") : ""));
    }),
  });
}

registerTab({
  id: "cluster",
  title: "Cluster",
  order: 90,
  mount(container, ctx) {
    const { api } = ctx;
    const messages = messageArea();
    const warning = h("div");
    const drainedBox = h("div");
    const factsBox = h("div");
    const membersBox = h("div");
    const partitions = partitionsPanel((params) => ctx.navigate(["cluster"], params));
    container.append(
      pageHeader("Cluster",
        "The ring of nodes as the node you are connected to sees it in etcd (a single node is a ring of one). Each queue belongs to a partition, and each partition is served by the node that claimed it; any node forwards a call to that node."),
      messages.el,
      warning,
      drainedBox,
      h("section", { class: "panel" }, h("h2", null, "This node"), factsBox),
      h("section", { class: "panel" }, h("h2", null, "Members"), membersBox),
      partitions.el);

    let lastData = "";
    let lastDown = "";
    async function load() {
      let status;
      let info;
      try {
        // Lease times cost etcd one small read per member; the CLI asks for them too.
        [status, info] = await Promise.all([api.admin("GetClusterStatus", { withLeases: true }), api.admin("GetClusterInfo", {})]);
      } catch (err) {
        if (!lastData) factsBox.replaceChildren(h("p", { class: "empty" }, "Could not load the cluster's status."));
        if (err?.name !== "UnreachableError") messages.error(err);
        return;
      }
      messages.clear();
      const data = JSON.stringify([status, info]);
      if (data === lastData) return;
      lastData = data;
      const activeQueues = info.activeQueues ?? [];
      factsBox.replaceChildren(facts([
        ["node", "Node", [h("span", { class: "mono" }, status.nodeId), toNum(info.startedAtMs) ? h("span", { class: "muted" }, ` (started ${relative(info.startedAtMs)})`) : null]],
        ["cluster", "Cluster", clusterText(status)],
        ["phase", "Phase", phaseText(status)],
        ["changelog", "Changelog", changelogText(status)],
        ["ring-version", "Ring version", String(status.ringVersion ?? "0")],
        ["partitions", "Partitions", count(status.partitions)],
        ["grains", "Active grains", `${count(info.activeGrains)}${activeQueues.length ? ` (${activeQueues.join(", ")})` : ""}`],
        ["parked", "Parked lease calls", count(info.parkedLeases)],
      ]));
      // Redrawn only when it says something else: it is an alert, read out when it changes.
      const down = JSON.stringify((status.partitionStates ?? []).filter((p) => p.ownerDown).map((p) => [p.partition, p.owner]));
      if (down !== lastDown) {
        lastDown = down;
        warning.replaceChildren(ownerDownWarning(status) ?? "");
      }
      drainedBox.replaceChildren(drainedNote(status) ?? "");
      replaceKeepingFocus(membersBox, membersTable(status));
      partitions.show(status);
    }

    partitions.setRoute(ctx.route);
    void load();
    return {
      refresh: load,
      update(route) {
        partitions.setRoute(route);
      },
    };
  },
});
