/**
 * Real-process clusters for the cluster tests: conveyord nodes on one etcd, and queue
 * names chosen so that the ring gives each node its own.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ring } from "./ring.js";
import { PARTITIONS_DEFAULT } from "../../src/cluster/partitions.js";
import { AdminService, type GetClusterStatusResponse } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { afterAll, afterEach, beforeAll } from "vitest";
import { Client } from "../../src/index.js";
import { startEtcd, type EtcdCluster } from "./etcd.js";
import { startNats, type NatsCluster } from "./nats.js";
import { NetLab, onHost } from "./netns.js";
import { eventually, NodeProcess, type NodeProcessOptions } from "./node-process.js";

/**
 * Starts one node per id on `etcd` (a new cluster name, `extra` settings added), pushing
 * each onto `nodes` for the caller to kill, and waits until every node sees every other
 * one active, so that the ring spreads the partitions before any is claimed.
 * `placed(id)` adds process options per node (e.g. its network namespace, netns.ts).
 */
export async function startCluster(
  etcd: EtcdCluster, ids: string[], nodes: NodeProcess[], memberTtlS: number, closers: Array<() => unknown>, extra: Record<string, string> = {},
  placed: (id: string) => Omit<NodeProcessOptions, "settings"> = () => ({}),
): Promise<{ cluster: string; byId: Map<string, NodeProcess> }> {
  const cluster = `f-${randomUUID().slice(0, 8)}`;
  const starts = await Promise.allSettled(ids.map((id) => NodeProcess.start({
    ...placed(id),
    settings: { cluster_etcd: etcd.endpoints, cluster_name: cluster, node_id: id, cluster_member_ttl: `${memberTtlS}s`, ...extra },
  })));
  // The nodes that did start are the caller's to kill, even when another failed to.
  for (const s of starts) if (s.status === "fulfilled") nodes.push(s.value);
  const failed = starts.find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
  const started = starts.map((s) => (s as PromiseFulfilledResult<NodeProcess>).value);
  const byId = new Map(ids.map((id, i) => [id, started[i]!]));
  await eventually("every node to see all members active", async () => {
    const views = await Promise.all(started.map((n) => statusOf(n, closers)));
    return views.every((v) => v.members.length === ids.length && v.members.every((m) => m.state === 2)) ? true : undefined;
  }, 15_000);
  return { cluster, byId };
}

/** The node's cluster status (its channel closed by `closers`). */
export function statusOf(node: NodeProcess, closers: Array<() => unknown>): Promise<GetClusterStatusResponse> {
  const channel = new RpcChannel({ address: node.grpcAddress });
  closers.push(() => channel.close());
  return channel.service(AdminService).getClusterStatus({ withLeases: false }, { timeoutMs: 5_000 });
}

/** Where each queue's partition is held (its recorded owner), as `node` sees it. */
export async function holders(node: NodeProcess, queues: string[], closers: Array<() => unknown>): Promise<Map<string, string>> {
  const status = await statusOf(node, closers);
  const ring = new Ring(["x"], 1, status.partitions);
  return new Map(queues.map((q) => [q, status.partitionStates[ring.partitionOf(q)]!.owner]));
}

/** One queue name per partition (`prefix` and a number), so a test uses every partition. */
export function queuePerPartition(prefix: string, partitions = PARTITIONS_DEFAULT): string[] {
  const ring = new Ring(["x"], 1, partitions);
  const byPartition = new Map<number, string>();
  for (let i = 0; byPartition.size < partitions; i++) {
    const q = `${prefix}${i}`;
    if (!byPartition.has(ring.partitionOf(q))) byPartition.set(ring.partitionOf(q), q);
  }
  return [...byPartition.values()];
}

/** `perNode` queues whose partitions the ring over `ids` gives each node. */
export function queuesOn(ids: string[], perNode: number): Map<string, string[]> {
  const ring = new Ring(ids, 1);
  const out = new Map(ids.map((id) => [id, [] as string[]]));
  for (let i = 0; [...out.values()].some((l) => l.length < perNode); i++) {
    const q = `q${i}`;
    const list = out.get(ring.ownerOf(q))!;
    if (list.length < perNode) list.push(q);
  }
  return out;
}

/**
 * The lifecycle every real-process cluster test file shares, registered as vitest hooks:
 * one etcd for the file; after each test, the closers run (clients, channels, workers) and
 * every node started is killed (resumed first if a test left it stopped) and its data dir
 * removed. `etcdSize` 3 gives the file a three-member etcd (for tests that kill one).
 */
export function clusterFixture(options: { etcdSize?: number } = {}) {
  let etcd: EtcdCluster | undefined;
  const nodes: NodeProcess[] = [];
  const closers: Array<() => unknown> = [];
  beforeAll(async () => {
    etcd = await startEtcd({ size: options.etcdSize ?? 1 });
  });
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
    for (const n of nodes.splice(0)) {
      // A SIGSTOPped process still dies of SIGKILL; SIGCONT first keeps its exit prompt.
      if (n.child.exitCode === null && n.child.signalCode === null) n.child.kill("SIGCONT");
      await n.kill();
      n.cleanup();
    }
  });
  afterAll(async () => {
    await etcd?.stop();
  });
  return {
    nodes,
    closers,
    get etcd(): EtcdCluster {
      if (!etcd) throw new Error("etcd is not started (use the fixture inside a test)");
      return etcd;
    },
    /** A client on `node`, closed after the test. */
    client(node: NodeProcess): Client {
      const c = new Client({ address: node.grpcAddress });
      closers.push(() => c.close());
      return c;
    },
  };
}

/**
 * A cluster of "machines" for the network fault tests: one network namespace per node
 * id (netns.ts; the hosts are named after the nodes), each running that node, an etcd
 * member and a nats-server (JetStream R3 across the three), so a fault on one host's
 * network cuts off exactly that machine. The test's clients stay in the root namespace
 * and reach every host through the lab's gateway. Registered as vitest hooks: the lab is
 * created once for the file. After each test the closers run and every host's faults are
 * healed; the cluster goes too (nodes killed, data dirs removed, nats-server and etcd
 * stopped), after each test or, with `shared`, after the file: `start` then starts it
 * once and gives every later test the same one (the CI budget has no room for a second
 * start-up). Each step runs even when an earlier one failed; after the file the lab goes
 * with anything still running in it. A failed test leaves its nodes' logs in a temp dir,
 * named on stderr.
 */
export function netClusterFixture(ids: string[], options: { shared?: boolean } = {}) {
  type Started = Awaited<ReturnType<typeof startCluster>> & { etcd: EtcdCluster; nats: NatsCluster };
  let lab: NetLab | undefined;
  let servers: { etcd: EtcdCluster; nats: NatsCluster } | undefined;
  let started: Started | undefined;
  const nodes: NodeProcess[] = [];
  const closers: Array<() => unknown> = [];
  const step = async (errors: unknown[], f: () => unknown) => {
    try {
      await f();
    } catch (error) {
      errors.push(error);
    }
  };
  const stopCluster = async (errors: unknown[]) => {
    for (const n of nodes.splice(0)) {
      await step(errors, async () => {
        await n.kill();
        n.cleanup();
      });
    }
    const s = servers;
    servers = undefined;
    started = undefined;
    if (s) await Promise.all([step(errors, () => s.nats.stop()), step(errors, () => s.etcd.stop())]);
  };
  beforeAll(async () => {
    lab = await NetLab.create(ids);
  }, 60_000);
  afterEach(async (context) => {
    const errors: unknown[] = [];
    if (context.task.result?.state === "fail" && nodes.length > 0) {
      const dir = mkdtempSync(join(tmpdir(), "conveyor-netfault-logs-"));
      for (const n of nodes) writeFileSync(join(dir, `${n.logs.map((l) => /"node":"([^"]+)"/.exec(l)?.[1]).find(Boolean) ?? n.child.pid}-${n.child.pid}.log`), `${n.logs.join("\n")}\n${n.stderr}`);
      console.error(`the nodes' logs: ${dir}`);
    }
    for (const close of closers.splice(0)) await step(errors, close);
    for (const id of ids) await step(errors, () => lab?.heal(id));
    if (!options.shared) await stopCluster(errors);
    if (errors.length > 0) throw errors[0];
  }, 60_000);
  afterAll(async () => {
    const errors: unknown[] = [];
    await stopCluster(errors);
    await step(errors, () => lab?.stop());
    if (errors.length > 0) throw errors[0];
  }, 60_000);
  const theLab = (): NetLab => {
    if (!lab) throw new Error("the lab is not created (use the fixture inside a test)");
    return lab;
  };
  return {
    nodes,
    closers,
    get lab(): NetLab {
      return theLab();
    },
    /**
     * Starts etcd (a member per host), nats-server (one per host, one cluster) and a node
     * per host with `cluster_nats` on all three, and waits as startCluster does; with
     * `shared`, only the first call starts it (later ones get it with their settings ignored).
     */
    async start(memberTtlS: number, extra: Record<string, string> = {}): Promise<Started> {
      if (started) return started;
      const hosts = ids.map((id) => theLab().host(id));
      const [etcd, nats] = await Promise.allSettled([startEtcd({ hosts }), startNats({ hosts })]);
      if (etcd.status === "rejected" || nats.status === "rejected") {
        if (etcd.status === "fulfilled") await etcd.value.stop();
        if (nats.status === "fulfilled") await nats.value.stop();
        throw etcd.status === "rejected" ? etcd.reason : (nats as PromiseRejectedResult).reason;
      }
      servers = { etcd: etcd.value, nats: nats.value };
      const cluster = await startCluster(etcd.value, ids, nodes, memberTtlS, closers,
        { cluster_nats: nats.value.urls.join(","), ...extra }, (id) => onHost(theLab().host(id)));
      started = { ...cluster, etcd: etcd.value, nats: nats.value };
      return started;
    },
  };
}
