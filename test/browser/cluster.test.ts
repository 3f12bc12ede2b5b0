/**
 * The dashboard's Cluster tab and the queues' owners, in headless Chromium against real
 * nodes: a single node (a ring of one: 64 partitions held by itself at epoch 1), then two
 * nodes on a real one-member etcd that the test starts (queues on both owners, each node's
 * page showing both members and the partitions claimed; kill -9 of one node → the warning
 * names it). Every wait is for a condition, bounded by the page's default timeout.
 * Needs `npm run build`, /usr/bin/chromium and etcd (see test/support/etcd.ts).
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Page } from "playwright-core";
import { Ring } from "../support/ring.js";
import { Client, json, newTask } from "../../src/index.js";
import { Dashboard, NARROW, hasText, pageOverflow } from "../support/dashboard.js";
import { startEtcd, type EtcdCluster } from "../support/etcd.js";
import { startNats, type NatsCluster } from "../support/nats.js";
import { NodeProcess } from "../support/node-process.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";

let d: Dashboard;

beforeAll(async () => {
  d = await Dashboard.start();
});

afterAll(async () => {
  await d?.close();
});

afterEach(() => {
  if (!d) return;
  expect(d.takeProblems(), "the page loaded only from the node and raised no errors").toEqual([]);
});

/** Every partition row of the page as [partition, holder, epoch, state, ring owner]. */
function partitionRows(page: Page): Promise<string[][]> {
  return page.locator("tr[data-partition]").evaluateAll((rows) => rows.map((r) => [...r.children].map((c) => c.textContent ?? "")));
}

describe("cluster tab, single node", () => {
  it("says single node, and shows the 64 partitions held by the node itself at epoch 1; queue rows name it", async () => {
    await d.sdk.client.enqueue(newTask("solo:job", json({})), { queue: "solo" });
    const page = await d.open("#/cluster");
    await hasText(page.locator('[data-fact="cluster"]'), "single node (no cluster_etcd)");
    await hasText(page.locator('[data-fact="phase"]'), "active");
    await hasText(page.locator('[data-fact="changelog"]'), "off (no cluster_nats: a crashed node's partitions wait for it)");
    await hasText(page.locator('[data-fact="ring-version"]'), "1");
    await hasText(page.locator('[data-fact="partitions"]'), "64");
    const node = (await page.locator('[data-fact="node"] .mono').textContent())!;
    expect(node).not.toBe("");

    const members = page.locator("tr[data-member]");
    await hasText(page.locator(`tr[data-member="${node}"] td[data-col="owns"]`), "64");
    expect(await members.count()).toBe(1);
    await hasText(members.locator('td[data-col="self"]'), "this node");
    await hasText(members.locator('td[data-col="state"]'), "active");

    await page.locator("tr[data-partition]").nth(63).waitFor();
    const rows = await partitionRows(page);
    expect(rows).toHaveLength(64);
    rows.forEach((row, p) => expect(row.map((c) => c.trim())).toEqual([String(p), node, "1", "owned", "—", node]));
    await hasText(page.locator("[data-partition-tally]"), `64 partitions: held by ${node} 64`);
    expect(await page.locator("[data-owner-down]").count()).toBe(0);
    expect(await page.getByRole("button", { name: "Next page" }).count()).toBe(0); // 64 rows: one page
    await d.screenshot(page, "cluster-single");

    const overview = await d.open("#/overview");
    await hasText(overview.locator('tr[data-queue="solo"] td[data-col="owner"]'), node);
    const queues = await d.open("#/queues");
    await hasText(queues.locator('tr[data-queue="solo"] td[data-col="owner"]'), node);
  });
});

describe("cluster tab, 4096 partitions", () => {
  it("shows them 64 at a time, pages through them by the hash, and fits 390 px", async () => {
    const big = await NodeProcess.start({ settings: { cluster_partitions: "4096" } });
    try {
      const page = await d.open("#/cluster", undefined, big);
      await hasText(page.locator('[data-fact="partitions"]'), "4,096");
      await page.getByText("Partitions 1–64 of 4,096 shown, page 1 of 64.").waitFor();
      expect(await page.locator("tr[data-partition]").count()).toBe(64);
      await page.getByRole("button", { name: "Next page" }).click();
      await page.waitForURL(/#\/cluster\?page=2$/);
      await page.locator('tr[data-partition="64"]').waitFor();
      await page.locator('tr[data-partition="127"]').waitFor();
      expect(await page.locator("tr[data-partition]").count()).toBe(64);
      // Focus stays on the button across the redraw, for the next keyboard step.
      expect(await page.evaluate<string | null>("document.activeElement?.textContent ?? null")).toBe("Next page");

      const last = await d.open("#/cluster?page=64", undefined, big);
      await last.locator('tr[data-partition="4095"]').waitFor();
      expect(await last.getByRole("button", { name: "Next page" }).isDisabled()).toBe(true);

      const narrow = await d.open("#/cluster?page=3", NARROW, big);
      await narrow.locator('tr[data-partition="128"]').waitFor();
      expect(await pageOverflow(narrow), "no horizontal scrolling with 4096 partitions at 390 px").toBeLessThanOrEqual(0);
    } finally {
      await big.stop();
      big.cleanup();
    }
  }, 60_000);
});

describe("cluster tab, two nodes on etcd", () => {
  let etcd: EtcdCluster;
  const nodes = new Map<string, NodeProcess>();
  const clients: Client[] = [];
  const cluster = `dash-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    etcd = await startEtcd();
    for (const id of ["n1", "n2"]) {
      nodes.set(id, await NodeProcess.start({
        settings: { cluster_etcd: etcd.endpoints, cluster_name: cluster, node_id: id, cluster_member_ttl: "3s" },
      }));
    }
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    for (const n of nodes.values()) {
      await n.kill();
      n.cleanup();
    }
    await etcd?.stop();
  });

  it("lists both members and the partitions claimed by enqueues; queue rows name their owner; a killed node is named", async () => {
    const n1 = nodes.get("n1")!;
    const n2 = nodes.get("n2")!;
    const page = await d.open("#/cluster", undefined, n1);
    await hasText(page.locator('[data-fact="cluster"]'), `${cluster} (etcd 1/1 healthy)`);
    // Both active before any partition is claimed, so the ring spreads the queues over both.
    for (const id of ["n1", "n2"]) await hasText(page.locator(`tr[data-member="${id}"] td[data-col="state"]`), "active");
    await hasText(page.locator('tr[data-member="n1"] td[data-col="self"]'), "this node");
    await hasText(page.locator("[data-partition-tally]"), "64 partitions: 64 unclaimed (claimed on first use)");

    // Two queues per owner, on partitions of their own, all written through n1.
    const ring = new Ring(["n1", "n2"], 1);
    const placed = new Map<string, string>();
    for (let i = 0; placed.size < 4; i++) {
      const q = `dq${i}`;
      const owner = ring.ownerOf(q);
      const taken = [...placed.keys()].some((other) => ring.partitionOf(other) === ring.partitionOf(q));
      if (!taken && [...placed.values()].filter((o) => o === owner).length < 2) placed.set(q, owner);
    }
    const producer = new Client({ address: n1.grpcAddress });
    clients.push(producer);
    for (const queue of placed.keys()) await producer.enqueue(newTask("dash:job", json({ queue })), { queue });

    for (const id of ["n1", "n2"]) await hasText(page.locator(`tr[data-member="${id}"] td[data-col="owns"]`), "2");
    for (const [queue, owner] of placed) {
      const row = page.locator(`tr[data-partition="${ring.partitionOf(queue)}"]`);
      await hasText(row.locator('td[data-col="holder"]'), owner);
      await hasText(row.locator('td[data-col="state"]'), "owned");
      expect(Number(await row.locator('td[data-col="epoch"]').textContent())).toBeGreaterThan(1);
    }
    // The filter keeps one node's partitions, and the view is a link.
    await page.getByLabel("Show").selectOption("node:n2");
    await page.waitForURL(/#\/cluster\?partitions=node%3An2$/);
    await page.waitForFunction("document.querySelectorAll('tr[data-partition]').length === 2");
    await d.screenshot(page, "cluster-two-nodes");

    // An operator pins an unclaimed partition to n2 (conveyor cluster move): the table and the tally show the pin.
    const heldPartitions = new Set([...placed.keys()].map((q) => ring.partitionOf(q)));
    const free = Array.from({ length: 64 }, (_, p) => p).find((p) => !heldPartitions.has(p))!;
    const admin = new RpcChannel({ address: n1.grpcAddress });
    try {
      expect((await admin.service(AdminService).movePartition({ partition: free, toNodeId: "n2", waitMs: 5_000 })).finished).toBe(true);
    } finally {
      admin.close();
    }
    await page.getByLabel("Show").selectOption("pinned");
    await page.waitForURL(/#\/cluster\?partitions=pinned$/);
    await hasText(page.locator(`tr[data-partition="${free}"] td[data-col="pinned"]`), "n2");
    await hasText(page.locator(`tr[data-partition="${free}"] td[data-col="ring-owner"]`), "n2");
    expect(await page.locator("tr[data-partition]").count()).toBe(1);
    expect(await page.locator("[data-partition-tally]").textContent()).toContain("1 pinned");

    // Any node's overview lists every queue with its owner.
    const overview = await d.open("#/overview", undefined, n2);
    for (const [queue, owner] of placed) await hasText(overview.locator(`tr[data-queue="${queue}"] td[data-col="owner"]`), owner);

    const narrow = await d.open("#/cluster", NARROW, n1);
    await narrow.locator('tr[data-member="n2"]').waitFor();
    expect(await pageOverflow(narrow), "no horizontal scrolling of the cluster tab at 390 px").toBeLessThanOrEqual(0);
    await d.screenshot(narrow, "cluster-narrow");

    // kill -9 n2: once its lease ends, its partitions wait for it and the warning names it.
    const watching = await d.open("#/cluster?partitions=down", undefined, n1);
    await n2.kill();
    const warning = watching.locator('[data-owner-down="n2"]');
    await warning.waitFor({ timeout: 20_000 });
    expect(await warning.textContent()).toContain("2 partitions wait for node n2, which is down");
    expect(await watching.locator("tr[data-partition]").count()).toBe(2);
    await hasText(watching.locator('tr[data-partition] td[data-col="state"]').first(), "owner down");
    expect(await pageOverflow(watching)).toBeLessThanOrEqual(0);
    await d.screenshot(watching, "cluster-owner-down");
  }, 150_000);
});

describe("cluster tab, with a changelog", () => {
  let etcd: EtcdCluster;
  let nats: NatsCluster;
  const nodes: NodeProcess[] = [];

  beforeAll(async () => {
    [etcd, nats] = await Promise.all([startEtcd(), startNats({ size: 3 })]);
    const cluster = `dash-log-${randomUUID().slice(0, 8)}`;
    for (const id of ["l1", "l2"]) {
      nodes.push(await NodeProcess.start({
        settings: { cluster_etcd: etcd.endpoints, cluster_nats: nats.urls.join(","), cluster_name: cluster, node_id: id, cluster_member_ttl: "3s" },
      }));
    }
  });

  afterAll(async () => {
    for (const n of nodes) {
      await n.kill();
      n.cleanup();
    }
    await Promise.all([etcd?.stop(), nats?.stop()]);
  });

  it("shows the log's stream and its leader, and how many partitions this node keeps a warm copy of", async () => {
    const [l1] = nodes as [NodeProcess, NodeProcess];
    const page = await d.open("#/cluster", undefined, l1);
    // l1 is the ring successor, hence the standby, of every partition l2 owns.
    const ring = new Ring(["l1", "l2"], 1);
    const standbyOf = Array.from({ length: 64 }, (_, p) => p).filter((p) => ring.ownerOfPartition(p) === "l2").length;
    expect(standbyOf).toBeGreaterThan(0);
    const fact = page.locator('[data-fact="changelog"]');
    await fact.filter({ hasText: new RegExp(`^CV_LOG, leader n\\d; standby for ${standbyOf} partitions, 0 entries behind$`) }).waitFor({ timeout: 20_000 });
    await d.screenshot(page, "cluster-changelog");
  }, 120_000);
});
