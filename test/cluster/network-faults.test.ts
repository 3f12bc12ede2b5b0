/**
 * Network faults (issue 14, tests 4 and 5), with real processes on three "machines": each
 * a network namespace of its own (test/support/netns.ts) running one conveyord, one etcd
 * member and one nats-server (JetStream R3 over the three), so an nftables rule in one
 * namespace cuts off, or drops packets of, exactly that machine. The test's producer,
 * worker and direct calls run in the root namespace and reach every machine through the
 * lab's gateway, which the faults never touch. Member TTL 5 s; keyed tasks under a
 * per-key limit of 1 on queues of all three nodes; the shared checker
 * (test/support/checker.ts) gives the verdict: nothing acknowledged lost, every task
 * completed, a rerun only after a lease lapse, never two runs of one key at once.
 *
 * Both tests run on one cluster (test 5 first: it must leave the cluster as it found it),
 * each with a producer, a worker and a checker of its own: CI's time budget has room for
 * one start-up. Leases last 10 s (lease_ttl), so a task whose settle a fault swallowed
 * runs again within 10 s rather than the default 30 s.
 *
 * Test 4, a partition: n3, the owner of busy queues, is cut off from the other two
 * machines, so from the etcd and NATS majority (its own etcd member and nats-server are
 * cut off with it). It stops acknowledging: its keep-alives go unanswered, so it fences
 * itself; its appends reach no quorum, and once the successor has fenced the log they
 * are refused. Every call sent straight to it during the cut is refused or times out.
 * n1 and n2 take its partitions over from the log (conveyor_cluster_failovers_total).
 * After the heal n3 registers as a new incarnation and takes its share back by handoff.
 *
 * Test 5, packet loss: every machine drops 10 % of the packets it sends to the other
 * machines for 30 s (issue 14 asks for 5-30 %). Nothing is lost, no SDK call fails but
 * with a retryable UNAVAILABLE, and ownership does not flap: every partition keeps its
 * owner and epoch, no node fences itself or changes incarnation, nothing is taken over.
 */
import { describe, expect, it } from "vitest";
import { Client, ConveyorError, json, newTask } from "../../src/index.js";
import { Checker, describeFailures, runProducer, runWorker } from "../support/checker.js";
import { holders, netClusterFixture, queuesOn, statusOf } from "../support/cluster.js";
import { netnsUnavailable } from "../support/netns.js";
import { eventually, type NodeProcess } from "../support/node-process.js";
import { Ring } from "../support/ring.js";

const IDS = ["n1", "n2", "n3"];
const TTL_S = 5;
/** The nodes' lease TTL (lease_ttl): a rerun sooner than this after the first run is unexplained. */
const LEASE_TTL_MS = 10_000;
/** Test 5: the share of packets each machine drops, and for how long (issue 14: 5-30 % for 30 s). */
const LOSS_PERCENT = 10;
const LOSS_MS = 30_000;
const ring64 = new Ring(["x"], 1, 64);
/** Test 4: the pause between two calls sent straight to the cut-off node (each has a 2 s deadline). */
const DIRECT_CALL_PACE_MS = 50;

/** A counter's value on a node's /metrics (0 when absent). */
async function counter(node: NodeProcess, name: string): Promise<number> {
  const line = (await node.metrics()).split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

/** Failed SDK calls as "code/reason" (an unknown error as its text), distinct. */
const reasons = (list: Array<{ error?: unknown }>) =>
  [...new Set(list.map((c) => (c.error instanceof ConveyorError ? `${c.error.code}/${c.error.reason}` : String(c.error))))].join(", ") || "none";

/** Milliseconds since `t0`, rounded, for the printed timeline. */
const since = (t0: number) => Math.round(performance.now() - t0);

const why = netnsUnavailable();

describe.skipIf(why !== undefined)(`network faults (three machines in network namespaces: conveyord, etcd, nats-server each; ${why ?? "root"})`, { timeout: 150_000 }, () => {
  const fixture = netClusterFixture(IDS, { shared: true });
  const { closers } = fixture;

  /** The cluster, a producer on n1 and a worker on n2 over two queues per node, each with a per-key limit of 1, with `acks` enqueues acknowledged. */
  async function underLoad(acks: number) {
    const t0 = performance.now();
    const { byId, nats, etcd } = await fixture.start(TTL_S, { lease_ttl: `${LEASE_TTL_MS / 1000}s` });
    const startedMs = since(t0);
    const nodes = IDS.map((id) => byId.get(id)!) as [NodeProcess, NodeProcess, NodeProcess];
    const placed = queuesOn(IDS, 2);
    const queues = [...placed.values()].flat();
    const producer = new Client({ address: nodes[0].grpcAddress, connectTimeoutMs: 60_000 });
    closers.push(() => producer.close());
    for (const q of queues) await producer.admin.setConcurrencyLimit(q, 1);
    const checker = new Checker();
    const load = runProducer(checker, producer, queues);
    runWorker(checker, nodes[1].grpcAddress, queues, closers);
    await eventually("work under way on every queue", async () => (checker.acknowledged.size >= acks ? true : undefined), 60_000);
    return { nodes, nats, etcd, placed, queues, producer, checker, load, startedMs, warmMs: since(t0) };
  }

  it(`test 5: ${LOSS_PERCENT} % packet loss between the machines for ${LOSS_MS / 1000} s: nothing lost, no ownership flapping`, async () => {
    const { nodes, queues, producer, checker, load, startedMs, warmMs } = await underLoad(150);
    const states = async () => {
      const views = await Promise.all(nodes.map((n) => statusOf(n, closers)));
      return {
        partitions: views[0]!.partitionStates.map((s) => `${s.partition}:${s.owner}:${s.state}@${s.epoch}`),
        nodes: views.map((v) => `${v.nodeId}:${v.incarnation}:${v.fences}`),
      };
    };
    const before = await states();
    const used = new Set(queues.map((q) => ring64.partitionOf(q)));
    expect(before.partitions.filter((s) => used.has(Number(s.split(":")[0])) && !s.includes(":owned@")), "the queues' partitions, held").toEqual([]);
    const sum = async (name: string) => (await Promise.all(nodes.map((n) => counter(n, name)))).reduce((a, b) => a + b, 0);
    const failoversBefore = await sum("conveyor_cluster_failovers_total");

    checker.phase = "packet loss";
    for (const id of IDS) await fixture.lab.loss(id, LOSS_PERCENT);
    const lossAt = performance.now();
    const ackedBefore = checker.acknowledged.size;
    const maxBefore = checker.maxCallMs;
    checker.maxCallMs = 0;
    // The fault's own duration.
    await new Promise((resolve) => setTimeout(resolve, LOSS_MS));
    const counts = await Promise.all(IDS.map((id) => fixture.lab.counters(id)));
    for (const id of IDS) await fixture.lab.heal(id);
    const lossMs = since(lossAt);
    const ackedInLoss = checker.acknowledged.size - ackedBefore;
    const maxInLoss = checker.maxCallMs;
    checker.phase = "after the loss";
    const after = await states();
    const failovers = (await sum("conveyor_cluster_failovers_total")) - failoversBefore;
    const atHeal = checker.acknowledged.size;
    await eventually("work to go on after the loss", async () => (checker.acknowledged.size >= atHeal + 60 ? true : undefined), 60_000);
    await load.stop();
    const verifyAt = performance.now();
    const verdict = await checker.verify(producer, LEASE_TTL_MS);

    const sent = counts.reduce((a, c) => a + c.sent, 0);
    const dropped = counts.reduce((a, c) => a + c.dropped, 0);
    console.log(`test 5, ${LOSS_PERCENT} % loss on every machine's packets to the others for ${lossMs} ms: ${dropped} of ${sent} packets between machines dropped ` +
      `(${(100 * dropped / Math.max(1, sent)).toFixed(1)} %; per machine ${counts.map((c, i) => `${IDS[i]} ${c.dropped}/${c.sent}`).join(", ")}); ` +
      `${ackedInLoss} enqueues acknowledged during the loss (${ackedBefore} before it, in ${warmMs - startedMs} ms), longest ${Math.round(maxInLoss)} ms (${Math.round(maxBefore)} ms before); ` +
      `partition owners and epochs ${JSON.stringify(after.partitions) === JSON.stringify(before.partitions) ? "unchanged" : "CHANGED"}, ` +
      `nodes' incarnations and fences ${JSON.stringify(after.nodes) === JSON.stringify(before.nodes) ? "unchanged" : "CHANGED"}, ${failovers} takeovers; ` +
      `${verdict.acknowledged} tasks acknowledged, ${verdict.deliveries} runs; ${checker.failures.length} failed SDK calls (${reasons(checker.failures)}); ` +
      `time: cluster up ${startedMs} ms, under load ${warmMs} ms, verdict ${since(verifyAt)} ms`);

    expect(after.partitions, "every partition's owner, state and epoch (no flapping)").toEqual(before.partitions);
    expect(after.nodes, "every node's incarnation and fence count").toEqual(before.nodes);
    expect(failovers).toBe(0);
    expect(ackedInLoss, "enqueues acknowledged during the loss").toBeGreaterThan(0);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
    expect(verdict.maxPerKey).toBe(1);
    // A settle refused LEASE_NOT_HELD is expected too when a partition was unreachable for
    // longer than the lease (10 s here): the takeover after the cut, and the elections
    // after the heal (up to 14 s in a loaded run), can outlast it. The task then ran again,
    // which the checker accepts only after its lease ran out (unexplainedReruns above).
    const lapsed = (f: { op: string; error: unknown }) => f.op === "settle" && f.error instanceof ConveyorError && f.error.reason === "LEASE_NOT_HELD";
    const unexpected = checker.failures.filter((f) => !(f.error instanceof ConveyorError && f.error.code === "UNAVAILABLE") && !lapsed(f));
    expect(unexpected, describeFailures(checker)).toEqual([]);
  });

  it("test 4: the owner cut off from the etcd and NATS majority stops acknowledging; the successor takes over; after the heal it rejoins as a new incarnation", async () => {
    const { nodes: [n1, n2, n3], nats, etcd, placed, producer, checker, load, startedMs, warmMs } = await underLoad(60);
    const n3Queues = placed.get("n3")!;
    const n3Partitions = new Set(n3Queues.map((q) => ring64.partitionOf(q)));
    await eventually("standbys following n3's partitions", async () => {
      const counts = await Promise.all([n1, n2].map((n) => counter(n, "conveyor_changelog_standby_partitions")));
      return counts[0]! + counts[1]! >= n3Partitions.size ? counts : undefined;
    }, 30_000);
    const before = await statusOf(n1, closers);
    for (const p of n3Partitions) expect(before.partitionStates[p]).toMatchObject({ owner: "n3", state: "owned" });
    const { incarnation: incarnationBefore, fences: fencesBefore } = await statusOf(n3, closers);
    const failoversBefore = (await Promise.all([n1, n2].map((n) => counter(n, "conveyor_cluster_failovers_total")))).reduce((a, b) => a + b, 0);
    const fencedLines = () => n3.logs.filter((l) => l.includes('"msg":"fenced itself')).length;
    const fencedLinesBefore = fencedLines();
    const streamLeader = await nats.servers[0]!.streamLeader("CV_LOG");
    const leaderHost = IDS[nats.servers.findIndex((s) => s.name === streamLeader)] ?? "none";
    const etcdLeader = await etcd.leader();
    const etcdLeaderHost = IDS[etcd.members.findIndex((m) => m === etcdLeader)] ?? "none";

    // Calls straight to n3 from the root namespace (the cut leaves the gateway's traffic alone).
    const direct = new Client({ address: n3.grpcAddress, timeoutMs: 2_000, connectTimeoutMs: 2_000 });
    closers.push(() => direct.close());
    await direct.enqueue(newTask("job", json({ probe: true })), { queue: n3Queues[0]! }).then((info) => checker.acknowledged.set(info.id, `${n3Queues[0]}/`));

    checker.phase = "n3 cut off";
    await fixture.lab.cut("n3");
    const cutAt = performance.now();
    const calls: Array<{ queue: string; sentMs: number; answeredMs: number; error?: unknown }> = [];
    let cut = true;
    const callers = n3Queues.map(async (queue) => {
      while (cut) {
        const sentMs = since(cutAt);
        const outcome = await direct.enqueue(newTask("job", json({ direct: true })), { queue }).then((info) => ({ info }), (error: unknown) => ({ error }));
        calls.push({ queue, sentMs, answeredMs: since(cutAt), ...("error" in outcome ? { error: outcome.error } : {}) });
        if ("info" in outcome) checker.acknowledged.set(outcome.info.id, `${queue}/`);
        // Paced, not synchronised: a fenced n3 refuses at once, and an unpaced loop only burns the shared CPU.
        await new Promise((resolve) => setTimeout(resolve, DIRECT_CALL_PACE_MS));
      }
    });

    const takenMs = await eventually("n1 and n2 to take n3's partitions over", async () => {
      const held = await holders(n1, n3Queues, closers);
      if ([...held.values()].every((owner) => owner === "n1" || owner === "n2")) return since(cutAt);
      const views = await Promise.all([n1, n2].map((n) => statusOf(n, closers)));
      throw new Error(views.map((st) => `${st.nodeId} sees members ${st.members.map((m) => `${m.nodeId}:${m.state}`).join(",")}; ` +
        [...n3Partitions].map((p) => `${p}: ${st.partitionStates[p]!.owner} ${st.partitionStates[p]!.state} @${st.partitionStates[p]!.epoch}`).join("; ")).join(" | "));
    }, 60_000);
    // The first enqueue on n3's queues sent after the cut and acknowledged: served by the new owners.
    const firstAckMs = await eventually("an enqueue on n3's queues sent after the cut, acknowledged (through n1)", async () => {
      let first = Infinity;
      for (const [id, at] of checker.acknowledgedAtMs) {
        if (checker.sentAtMs.get(id)! > cutAt && n3Queues.includes(checker.acknowledged.get(id)!.split("/")[0]!)) first = Math.min(first, at);
      }
      return Number.isFinite(first) ? Math.round(first - cutAt) : undefined;
    }, 60_000);
    const fenced = fencedLines() > fencedLinesBefore;
    checker.phase = "n3 still cut off, its partitions taken over";
    const atTakeover = checker.acknowledged.size;
    await eventually("work to go on while n3 is cut off", async () => (checker.acknowledged.size >= atTakeover + 60 ? true : undefined), 60_000);
    const failovers = (await Promise.all([n1, n2].map((n) => counter(n, "conveyor_cluster_failovers_total")))).reduce((a, b) => a + b, 0) - failoversBefore;

    checker.phase = "healed";
    cut = false;
    const healMs = since(cutAt);
    await fixture.lab.heal("n3");
    const healAt = performance.now();
    await Promise.all(callers);
    const after = await eventually("n3 back as a new active incarnation in n1's view", async () => {
      const m = (await statusOf(n1, closers)).members.find((x) => x.nodeId === "n3");
      return m && m.incarnation !== incarnationBefore && m.state === 2 ? m : undefined;
    }, 30_000);
    const rejoinedMs = since(healAt);
    await eventually("n3 to hold its share again", async () => {
      const held = await holders(n1, n3Queues, closers);
      if ([...held.values()].every((owner) => owner === "n3")) return true;
      const views = await Promise.all([n1, n2, n3].map((n) => statusOf(n, closers)));
      throw new Error(views.map((st) => `${st.nodeId}: ` + [...n3Partitions].map((p) => `${p} ${st.partitionStates[p]!.owner} ${st.partitionStates[p]!.state} @${st.partitionStates[p]!.epoch}`).join(", ")).join(" | "));
    }, 60_000);
    const backMs = since(healAt);
    checker.phase = "after n3's return";
    const atReturn = checker.acknowledged.size;
    await eventually("work to go on after n3's return", async () => (checker.acknowledged.size >= atReturn + 60 ? true : undefined), 60_000);
    await load.stop();
    const verifyAt = performance.now();
    const verdict = await checker.verify(producer, LEASE_TTL_MS);
    const own = await statusOf(n3, closers);

    const refused = calls.filter((c) => c.error);
    console.log(`test 4, n3 cut off (member TTL ${TTL_S} s; etcd leader on ${etcdLeaderHost}, CV_LOG stream leader on ${leaderHost} before the cut): ` +
      `n3 ${fenced ? "fenced itself" : "did NOT fence itself"}; its ${n3Partitions.size} partitions held by n1/n2 ${takenMs} ms after the cut, ` +
      `first acknowledged enqueue sent after the cut ${firstAckMs} ms; ${failovers} takeovers (conveyor_cluster_failovers_total); ` +
      `healed at ${healMs} ms; n3 active again as a new incarnation ${rejoinedMs} ms after the heal, holding its share again ${backMs} ms after it; ` +
      `calls sent straight to n3 during the cut: ${calls.length}, ${refused.length} refused or timed out (${reasons(refused)}); ` +
      `${verdict.acknowledged} tasks acknowledged, ${verdict.deliveries} runs, longest acknowledged enqueue ${Math.round(checker.maxCallMs)} ms; ` +
      `${checker.failures.length} failed SDK calls (${reasons(checker.failures)}); ` +
      `settle errors the worker reported (UNAVAILABLE ones sent again): ${checker.workerReports.filter((r) => r.context === "settle").length} (${reasons(checker.workerReports.filter((r) => r.context === "settle"))}); ` +
      `time: cluster up ${startedMs} ms, under load ${warmMs} ms, verdict ${since(verifyAt)} ms`);
    const byPhase = new Map<string, Array<{ error?: unknown }>>();
    for (const f of checker.failures) byPhase.set(f.phase, [...(byPhase.get(f.phase) ?? []), f]);
    for (const [phase, list] of byPhase) console.log(`  failed SDK calls while "${phase}": ${list.length} (${reasons(list)})`);

    expect(fenced, "n3 logged that it fenced itself").toBe(true);
    // Nothing sent to the cut-off n3 was acknowledged while it was cut off.
    expect(calls.filter((c) => !c.error && c.answeredMs < healMs), "calls to n3 acknowledged during the cut").toEqual([]);
    expect(own).toMatchObject({ phase: "active", serving: true, incarnation: after.incarnation });
    expect(own.fences).toBeGreaterThan(fencesBefore);
    expect(failovers, "partitions taken over (conveyor_cluster_failovers_total on n1 and n2)").toBe(n3Partitions.size);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
    expect(verdict.maxPerKey).toBe(1);
    // Only retryable UNAVAILABLE reached the SDK: the cut-off owner's partitions while they
    // failed over, and every partition while JetStream elected leaders (after the cut, and
    // after the heal: nats-server 2.9.10's Raft has no pre-vote, so the returning server
    // deposes the leaders with the terms it grew alone).
    // A settle refused LEASE_NOT_HELD is expected too when a partition was unreachable for
    // longer than the lease (10 s here): the takeover after the cut, and the elections
    // after the heal (up to 14 s in a loaded run), can outlast it. The task then ran again,
    // which the checker accepts only after its lease ran out (unexplainedReruns above).
    const lapsed = (f: { op: string; error: unknown }) => f.op === "settle" && f.error instanceof ConveyorError && f.error.reason === "LEASE_NOT_HELD";
    const unexpected = checker.failures.filter((f) => !(f.error instanceof ConveyorError && f.error.code === "UNAVAILABLE") && !lapsed(f));
    expect(unexpected, describeFailures(checker)).toEqual([]);
  });
});
