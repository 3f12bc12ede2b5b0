/**
 * Every read command of the real CLI answers, completely, on every node of a cluster with
 * a changelog and standbys (issue 34, item 3). With `cluster_nats` every member keeps a
 * warm copy of other members' partitions in its own SQLite; an admin read that took such
 * a copy for a queue this node serves (and asked the queue's grain) answered WRONG_OWNER
 * on every node, and one that read only the answering node's rows missed the queues held
 * elsewhere. Here each of three nodes owns a queue with tasks (pending and aggregating),
 * a concurrency limit, a rate limit, a group override and a schedule; a task type has a
 * strategy; a worker polls one node. Each node must answer each read with all of it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { json, newTask, Mux, Worker } from "../../src/index.js";
import { clusterFixture, holders, queuesOn, startCluster } from "../support/cluster.js";
import { startNats, type NatsCluster } from "../support/nats.js";
import { eventually, type NodeProcess } from "../support/node-process.js";
import { runCli } from "../support/sdk.js";

const fixture = clusterFixture();
const { nodes, closers } = fixture;
let nats: NatsCluster | undefined;

beforeAll(async () => {
  nats = await startNats({ size: 3 });
});
afterAll(async () => {
  await nats?.stop();
});

type Json = Record<string, unknown> & { [k: string]: any };

/** Runs a CLI command with --json on `node`; fails the test with the CLI's stderr when it exits non-zero. */
async function cliJson(node: NodeProcess, ...args: string[]): Promise<Json> {
  try {
    const { stdout } = await runCli(node, "--json", ...args);
    return JSON.parse(stdout) as Json;
  } catch (error) {
    const e = error as { code?: number; stderr?: string };
    throw new Error(`conveyor ${args.join(" ")} on ${node.grpcAddress} exited ${e.code}: ${e.stderr ?? String(error)}`);
  }
}

/** A gauge's value on a node's /metrics (0 when absent). */
async function gauge(node: NodeProcess, name: string): Promise<number> {
  const line = (await node.metrics()).split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

const sorted = (xs: Iterable<string>) => [...xs].sort();

describe("admin reads on a cluster with a changelog and standbys (real processes: etcd, three nats-server, three nodes, the CLI)", { timeout: 240_000 }, () => {
  it("every read command of the CLI answers on every node, with the data of every node's queues", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, 5, closers, { cluster_nats: nats!.urls.join(","), cluster_standbys: "2" });
    const n1 = byId.get("n1")!;
    const placed = queuesOn(ids, 1);
    const queues = sorted([...placed.values()].flat());

    // Everything is written through n1 (forwarded to each queue's owner), as an operator would.
    const sdk = fixture.client(n1);
    const taskIds = new Map<string, string>();
    for (const q of queues) {
      const plain = await sdk.enqueueBatch([0, 1, 2].map((n) => ({ task: newTask("plain", json({ n })), options: { queue: q } })));
      const first = plain[0]!;
      if (!("id" in first)) throw first;
      taskIds.set(q, first.id);
      await sdk.enqueueBatch([0, 1].map((n) => ({ task: newTask("digest", json({ n })), options: { queue: q, group: "g1" } })));
      await cliJson(n1, "concurrency", "set", q, "--max", "2");
      await cliJson(n1, "ratelimit", "set", q, "--rate", "5");
      await cliJson(n1, "group", "set", q, "--group", "g1", "--max-size", "50", "--max-delay", "1h", "--grace", "1h");
      await cliJson(n1, "schedule", "set", "hourly", "--queue", q, "--type", "tick", "--every", "1h");
    }
    await cliJson(n1, "strategy", "set", "plain", "--expression", "input.n", "--max-runs", "3", "--strategy", "GROUP_ROUND_ROBIN");
    const worker = new Worker({ address: byId.get("n2")!.grpcAddress, queues: ["admin-reads-idle"], workerId: "idle-worker", handleSignals: false, logger: null, mux: new Mux().handle("never", async () => {}) });
    closers.push(() => worker.stop());
    worker.start();

    // The queues are where the ring puts them, and every member's copy of the others' partitions is current.
    const owners = await holders(n1, queues, closers);
    expect(sorted(owners.values()), "one queue per node").toEqual(ids);
    await eventually("every node standing by for the other nodes' partitions, 0 entries behind", async () => {
      for (const n of byId.values()) {
        if ((await gauge(n, "conveyor_changelog_standby_partitions")) === 0) return undefined;
        if ((await gauge(n, "conveyor_changelog_standby_lag_entries")) !== 0) return undefined;
      }
      return true;
    }, 60_000);
    await eventually("the worker known to n2", async () => ((await cliJson(byId.get("n2")!, "worker", "ls")).workers?.length ? true : undefined));

    for (const [id, node] of byId) {
      const on = `on ${id}`;
      const queueLs = await cliJson(node, "queue", "ls");
      expect(sorted(queueLs.queues.map((q: Json) => q.name)), `queue ls ${on}`).toEqual(queues);
      for (const q of queueLs.queues) {
        expect({ queue: q.name, pending: q.counts.pending, aggregating: q.counts.aggregating }, `queue ls ${on}`).toEqual({ queue: q.name, pending: "3", aggregating: "2" });
      }

      const limits = await cliJson(node, "concurrency", "ls");
      expect(sorted(limits.limits.map((l: Json) => `${l.queue}:${l.max}`)), `concurrency ls ${on}`).toEqual(queues.map((q) => `${q}:2`));

      const rates = await cliJson(node, "ratelimit", "ls");
      expect(sorted(rates.limits.map((l: Json) => `${l.queue}:${l.ratePerSec}`)), `ratelimit ls ${on}`).toEqual(queues.map((q) => `${q}:5`));

      const groupConfigs = await cliJson(node, "group", "ls");
      expect(sorted(groupConfigs.configs.map((c: Json) => `${c.queue}/${c.group}:${c.maxSize}`)), `group ls ${on}`).toEqual(queues.map((q) => `${q}/g1:50`));
      const live = await cliJson(node, "group", "ls", "--live");
      expect(sorted(live.groups.map((g: Json) => `${g.queue}/${g.group}:${g.size}`)), `group ls --live ${on}`).toEqual(queues.map((q) => `${q}/g1:2`));

      const schedules = await cliJson(node, "schedule", "ls");
      expect(sorted(schedules.schedules.map((s: Json) => `${s.task.queue}/${s.name}`)), `schedule ls ${on}`).toEqual(queues.map((q) => `${q}/hourly`));

      const strategies = await cliJson(node, "strategy", "ls");
      expect(strategies.types.map((t: Json) => t.type), `strategy ls ${on}`).toEqual(["plain"]);

      const workers = await cliJson(node, "worker", "ls");
      // Each node lists the workers calling it: the SDK worker calls n2 and its queue's owner (once per node).
      expect(sorted(new Set(workers.workers.map((w: Json) => w.workerId as string))), `worker ls ${on}`).toEqual(["idle-worker"]);

      const status = await cliJson(node, "cluster", "status", "--partitions");
      expect({ node: status.nodeId, members: sorted(status.members.map((m: Json) => m.nodeId)) }, `cluster status ${on}`).toEqual({ node: id, members: ids });

      for (const q of queues) {
        const one = { queue: q, node: id };
        // The per-queue forms route to the queue's owner (the lists above ask every member).
        expect((await cliJson(node, "group", "ls", q, "--live")).groups.map((g: Json) => g.size), `group ls ${q} --live ${on}`).toEqual([2]);
        const tasks = await cliJson(node, "task", "ls", q);
        const states = tasks.tasks.map((t: Json) => t.state as string).sort();
        expect({ ...one, states }, `task ls ${q} ${on}`).toEqual({ ...one, states: ["TASK_STATE_AGGREGATING", "TASK_STATE_AGGREGATING", "TASK_STATE_PENDING", "TASK_STATE_PENDING", "TASK_STATE_PENDING"] });
        const got = await cliJson(node, "task", "get", taskIds.get(q)!);
        expect({ ...one, id: got.task.id, queue: got.task.queue }, `task get ${on}`).toEqual({ ...one, id: taskIds.get(q), queue: q });
      }
    }
  });
});
