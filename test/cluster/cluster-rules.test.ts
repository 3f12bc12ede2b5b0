/**
 * Task-type rules live in etcd (issue 13, "Cluster-wide state"), with real processes: one
 * etcd and conveyord nodes on 127.0.0.1. Rules set through one node govern enqueues served
 * by the others; a node started later, or stopped (SIGTERM) or paused (SIGSTOP, past its
 * member TTL) while the rules changed, holds the cluster's rules once it serves again;
 * bad input through any node changes nothing anywhere (the etcd version of the rule set
 * included); and two nodes writing conflicting rules at once cannot both win.
 */
import { describe, expect, it } from "vitest";
import { ConveyorError, json, newTask, type ConcurrencyRuleSpec } from "../../src/index.js";
import { EtcdCoordination } from "../../src/cluster/etcd-coordination.js";
import { LimitStrategy } from "../../src/gen/conveyor/v1/task_pb.js";
import { WorkerService } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { clusterFixture, queuesOn, startCluster as startClusterOf, statusOf as statusOfNode } from "../support/cluster.js";
import { eventually, NodeProcess } from "../support/node-process.js";

const TTL_S = 3;
const fixture = clusterFixture();
const { nodes, closers, client } = fixture;

const startCluster = (ids: string[]) => startClusterOf(fixture.etcd, ids, nodes, TTL_S, closers);

/** The rules a node lists, as comparable values (its cache of the cluster's set). */
async function rulesOn(node: NodeProcess) {
  const types = await client(node).admin.listStrategies();
  return types.map((t) => ({ type: t.type, source: t.source, rules: t.rules, updatedAt: t.updatedAt?.getTime() }));
}

/** Waits until every node lists what `reference` lists. */
async function sameEverywhere(reference: NodeProcess, others: NodeProcess[], what: string) {
  const expected = await rulesOn(reference);
  for (const node of others) {
    await eventually(`${what}: the node on ${node.grpcAddress} to list the same rules as ${reference.grpcAddress}`, async () => {
      const seen = await rulesOn(node);
      return JSON.stringify(seen) === JSON.stringify(expected) ? true : undefined;
    }, 15_000);
  }
  return expected;
}

/** The version of the cluster's rule set in etcd (the revision of its last write). */
async function rulesVersion(cluster: string): Promise<number> {
  const coordination = new EtcdCoordination({ endpoints: fixture.etcd.hosts, cluster });
  try {
    return (await coordination.typeRules()).version;
  } finally {
    await coordination.close();
  }
}

function workerRpc(node: NodeProcess) {
  const channel = new RpcChannel({ address: node.grpcAddress });
  closers.push(() => channel.close());
  return channel.service(WorkerService);
}

async function rejection(p: Promise<unknown>): Promise<ConveyorError> {
  const outcome = await p.then(() => undefined, (err: unknown) => err);
  if (!(outcome instanceof ConveyorError)) throw new Error(`expected a ConveyorError, got ${outcome === undefined ? "success" : String(outcome)}`);
  return outcome;
}

const oneAtATime: ConcurrencyRuleSpec[] = [{ expression: "input.user", maxRuns: 1, limitStrategy: "CANCEL_NEWEST" }];
const named = (...names: string[]): ConcurrencyRuleSpec[] => names.map((name) => ({ name, expression: "input.k", maxRuns: 1, limitStrategy: "GROUP_ROUND_ROBIN" }));

describe("cluster: task-type rules in etcd (real processes)", { timeout: 120_000 }, () => {
  it("rules set through n1 govern enqueues served by n2 and n3; a worker's rules registered on n3 reach n1; a node started later holds them before it serves", async () => {
    const ids = ["n1", "n2", "n3"];
    const { cluster, byId } = await startCluster(ids);
    const [n1, n2, n3] = ids.map((id) => byId.get(id)!) as [NodeProcess, NodeProcess, NodeProcess];

    const set = await client(n1).admin.setStrategies("mail", oneAtATime);
    expect(set).toMatchObject({ type: "mail", source: "operator" });
    // The write answered after n1's own cache held it.
    expect((await rulesOn(n1)).map((t) => t.type)).toEqual(["mail"]);
    await sameEverywhere(n1, [n2, n3], "after SetStrategies on n1");

    // Through n2, into a queue of each owner: the second task of one user is cancelled at arrival.
    for (const [owner, [queue]] of queuesOn(ids, 1)) {
      const producer = client(n2);
      const first = await producer.enqueue(newTask("mail", json({ user: "ann" })), { queue: queue! });
      const second = await producer.enqueue(newTask("mail", json({ user: "ann" })), { queue: queue! });
      expect([owner, first.state, second.state]).toEqual([owner, "pending", "cancelled"]);
      expect(await producer.getTask(second.id)).toMatchObject({ cancelReason: "CONCURRENCY_LIMIT" });
    }

    // A worker's declaration through n3 (replaced per type, source "worker") reaches n1.
    await workerRpc(n3).registerTaskTypes({
      workerId: "w1", types: [{ type: "sms", concurrency: [{ expression: "input.to", maxRuns: 2, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] }],
    }, { timeoutMs: 10_000 });
    const expected = await sameEverywhere(n3, [n1, n2], "after RegisterTaskTypes on n3");
    expect(expected.map((t) => [t.type, t.source])).toEqual([["mail", "operator"], ["sms", "worker"]]);

    // Cost: a write through n1 (etcd transaction + n1's watch), and until n3 lists it (n3's watch, seen by polling n3).
    const writeMs: number[] = [];
    const seenMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      await client(n1).admin.setStrategies(`m${i}`, oneAtATime);
      writeMs.push(performance.now() - started);
      await eventually(`n3 to list m${i}`, async () => ((await rulesOn(n3)).some((t) => t.type === `m${i}`) ? true : undefined), 15_000);
      seenMs.push(performance.now() - started);
    }
    const fmt = (ms: number[]) => ms.map((m) => m.toFixed(0)).join(", ");
    console.log(`rules write through n1: ${fmt(writeMs)} ms; listed by n3 after: ${fmt(seenMs)} ms`);

    // A node that starts now reads the set before it serves: its first answer has it (no waiting).
    const everything = await sameEverywhere(n1, [n2, n3], "after the timed writes");
    const n4 = await NodeProcess.start({ settings: { cluster_etcd: fixture.etcd.endpoints, cluster_name: cluster, node_id: "n4", cluster_member_ttl: `${TTL_S}s` } });
    nodes.push(n4);
    expect(await rulesOn(n4)).toEqual(everything);
    expect(await rulesVersion(cluster)).toBeGreaterThan(0);
  });

  it("a node stopped while the rules changed has them when it is back; a node paused past its TTL catches up when it resumes", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(ids);
    const [n1, n2, n3] = ids.map((id) => byId.get(id)!) as [NodeProcess, NodeProcess, NodeProcess];
    await client(n1).admin.setStrategies("a", oneAtATime);
    await sameEverywhere(n1, [n2, n3], "after setting a");

    expect(await n3.stop()).toBe(0);
    await client(n2).admin.setStrategies("b", oneAtATime);
    await client(n1).admin.deleteStrategies("a");
    const n3again = await n3.restart();
    nodes.push(n3again);
    // Read before it served, so its first answer is the cluster's set (its SQLite mirror still had "a").
    expect(await rulesOn(n3again)).toEqual(await rulesOn(n1));
    expect((await rulesOn(n3again)).map((t) => t.type)).toEqual(["b"]);

    // SIGSTOP n2 until the others see its registration gone, change the rules, resume it.
    const pid = n2.child.pid!;
    process.kill(pid, "SIGSTOP");
    closers.push(() => {
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        // already gone
      }
    });
    await eventually("n1 to see paused n2 leave the members", async () => {
      const status = await statusOfNode(n1, closers);
      return status.members.some((m) => m.nodeId === "n2") ? undefined : true;
    }, 20_000);
    await client(n1).admin.setStrategies("c", [{ expression: "input.user", maxRuns: 3, limitStrategy: "GROUP_ROUND_ROBIN" }]);
    await client(n3again).admin.deleteStrategies("b");
    process.kill(pid, "SIGCONT");
    const expected = await sameEverywhere(n1, [n2, n3again], "after n2 resumed");
    expect(expected.map((t) => t.type)).toEqual(["c"]);
  });

  it("bad input through any node is refused and changes nothing in the cluster; two nodes writing conflicting rules at once cannot both win", async () => {
    const ids = ["n1", "n2"];
    const { cluster, byId } = await startCluster(ids);
    const [n1, n2] = ids.map((id) => byId.get(id)!) as [NodeProcess, NodeProcess];
    await client(n1).admin.setStrategies("base", named("x", "y"));
    const before = await sameEverywhere(n1, [n2], "after setting base");
    const version = await rulesVersion(cluster);

    const admin2 = client(n2).admin;
    expect(await rejection(admin2.setStrategies("t", [{ expression: "input.", maxRuns: 1, limitStrategy: "CANCEL_NEWEST" }])))
      .toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "rules[0].expression" });
    const order = await rejection(admin2.setStrategies("t", named("y", "x")));
    expect(order).toMatchObject({ code: "INVALID_ARGUMENT", field: "rules" });
    expect(order.message).toMatch(/orders the shared rules \[y, x\] but type "base" orders them \[x, y\]/);
    expect(await rejection(admin2.deleteStrategies("nothing"))).toMatchObject({ code: "NOT_FOUND", reason: "RULES_NOT_FOUND" });
    // A worker's declaration is all or nothing: one bad type stores neither.
    expect(await rejection(workerRpc(n2).registerTaskTypes({
      workerId: "w", types: [
        { type: "good", concurrency: [{ expression: "input.k", maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] },
        { type: "bad", concurrency: [{ expression: "input.k", maxRuns: 0, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] },
      ],
    }, { timeoutMs: 10_000 }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "types[1].concurrency[0].max_runs" });
    expect(await rulesVersion(cluster)).toBe(version);
    expect(await rulesOn(n1)).toEqual(before);
    expect(await rulesOn(n2)).toEqual(before);

    // p chains u then v, q chains v then u: each alone is valid, together they are not.
    // Whichever is written first, the other is validated against it (or refused by etcd
    // for naming an old version, then validated again) and fails.
    const outcomes = await Promise.allSettled([client(n1).admin.setStrategies("p", named("u", "v")), admin2.setStrategies("q", named("v", "u"))]);
    const won = outcomes.filter((o) => o.status === "fulfilled");
    const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
    expect([won.length, lost.length]).toEqual([1, 1]);
    expect(lost[0]!.reason).toMatchObject({ code: "INVALID_ARGUMENT", field: "rules" });
    const after = await sameEverywhere(n1, [n2], "after the conflicting writes");
    expect(after.map((t) => t.type).filter((t) => t === "p" || t === "q")).toHaveLength(1);
  });
});
