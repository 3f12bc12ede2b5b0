/**
 * Real-process clusters for the cluster tests: conveyord nodes on one etcd, and queue
 * names chosen so that the ring gives each node its own.
 */
import { randomUUID } from "node:crypto";
import { Ring } from "./ring.js";
import { PARTITIONS_DEFAULT } from "../../src/cluster/partitions.js";
import { AdminService, type GetClusterStatusResponse } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { afterAll, afterEach, beforeAll } from "vitest";
import { Client } from "../../src/index.js";
import { startEtcd, type EtcdCluster } from "./etcd.js";
import { eventually, NodeProcess } from "./node-process.js";

/**
 * Starts one node per id on `etcd` (a new cluster name, `extra` settings added), pushing
 * each onto `nodes` for the caller to kill, and waits until every node sees every other
 * one active, so that the ring spreads the partitions before any is claimed.
 */
export async function startCluster(
  etcd: EtcdCluster, ids: string[], nodes: NodeProcess[], memberTtlS: number, closers: Array<() => unknown>, extra: Record<string, string> = {},
): Promise<{ cluster: string; byId: Map<string, NodeProcess> }> {
  const cluster = `f-${randomUUID().slice(0, 8)}`;
  const starts = await Promise.allSettled(ids.map((id) => NodeProcess.start({
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
