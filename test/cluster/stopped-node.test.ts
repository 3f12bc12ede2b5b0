/**
 * A node paused past its lease (issue 13, test 7), with real processes: three nodes on
 * one etcd, n3 holding queues with acknowledged tasks. n3 gets SIGSTOP and stays stopped
 * until etcd has ended its lease. What part 1 does then (ARCHITECTURE, "partition
 * ownership"): n3's partitions are *not* claimed by another node (its rows are only on
 * its disk), so they answer OWNER_DOWN; a partition n3 never claimed but the ring gave it
 * is claimed by the node the ring names without n3. Meanwhile calls are sent straight to
 * the stopped n3 over a connection it had accepted before, so their bytes wait in its
 * socket for the moment it wakes, before it has noticed anything.
 *
 * After SIGCONT: n3 fences itself and registers as a new incarnation; none of the calls
 * for its own partitions it received while stopped is acknowledged before that
 * re-registration (each is refused with a retryable error or served after it, at a new
 * epoch; calls for other nodes' partitions it forwards to them); its partitions are claimed
 * again at higher epochs; the partition claimed meanwhile by another node is not taken
 * over by n3 on its old view but handed to it with its rows; and every acknowledged task
 * is intact and runs to completion.
 */
import { describe, expect, it } from "vitest";
import { Ring } from "../support/ring.js";
import { Client, ConveyorError, json, newTask } from "../../src/index.js";
import { Checker, describeFailures, runWorker } from "../support/checker.js";
import { clusterFixture, queuesOn, startCluster, statusOf } from "../support/cluster.js";
import { eventually, type NodeProcess } from "../support/node-process.js";

const TTL_S = 3;
const LEASE_TTL_MS = 30_000;
const fixture = clusterFixture();
const { nodes, closers } = fixture;

interface LogLine {
  msg?: string;
  time?: number;
  fences?: number;
  partition?: number;
  epoch?: number;
}
const logsOf = (node: NodeProcess) => node.logs.map((l) => JSON.parse(l) as LogLine);

describe("a node stopped past its lease (real processes)", { timeout: 120_000 }, () => {
  it("SIGSTOP then SIGCONT: nothing is acknowledged on the old registration, it rejoins as a new incarnation, every acknowledged task is intact", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, TTL_S, closers);
    const [n1, n3] = [byId.get("n1")!, byId.get("n3")!];
    const placed = queuesOn(ids, 3);
    // n3's first two queues are used (claimed) before the pause; its third is not.
    const [heldQ, heldQ2, lateQ] = placed.get("n3")!;
    const others = [...placed.get("n1")!, ...placed.get("n2")!];
    const used = [heldQ!, heldQ2!, ...others];
    const ring = new Ring(ids, 1);
    const interim = new Ring(["n1", "n2"], 1).ownerOf(lateQ!);
    const checker = new Checker();
    const producer = new Client({ address: n1.grpcAddress });
    closers.push(() => producer.close());
    const enqueue = async (client: Client, queue: string, i: number) => {
      const info = await client.enqueue(newTask("job", json({ i })), { queue, concurrencyKey: "k0" });
      checker.acknowledged.set(info.id, `${queue}/k0`);
      return info;
    };
    for (let i = 0; i < 10; i++) await Promise.all(used.map((q) => enqueue(producer, q, i)));
    const epochsBefore = new Map((await statusOf(n1, closers)).partitionStates.map((s) => [s.partition, s]));
    const heldPartitions = [heldQ!, heldQ2!].map((q) => ring.partitionOf(q));
    for (const p of heldPartitions) expect(epochsBefore.get(p)).toMatchObject({ owner: "n3", state: "owned" });
    const incarnationBefore = (await statusOf(n3, closers)).incarnation;

    // A connection to n3 that it accepted while awake: calls sent on it while n3 is
    // stopped sit in its socket until it wakes.
    const direct = new Client({ address: n3.grpcAddress, timeoutMs: 60_000 });
    closers.push(() => direct.close());
    await enqueue(direct, heldQ!, -1);

    n3.child.kill("SIGSTOP");
    checker.phase = "n3 stopped";
    await eventually("n3's lease to end while it is stopped (n1 no longer lists it)", async () =>
      ((await statusOf(n1, closers)).members.some((m) => m.nodeId === "n3") ? undefined : true), TTL_S * 1000 + 10_000);

    // Its partitions are not served empty by anyone else...
    const refused = await producer.enqueue(newTask("job", json({})), { queue: heldQ! }).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(ConveyorError);
    expect(refused).toMatchObject({ code: "UNAVAILABLE", reason: "OWNER_DOWN" });
    expect((refused as Error).message).toContain("n3");
    // ...while a partition it never claimed goes to the ring's owner without it, and the rest keep serving.
    for (let i = 0; i < 5; i++) await enqueue(producer, lateQ!, 100 + i);
    for (const q of others) await enqueue(producer, q, 100);
    const lateP = ring.partitionOf(lateQ!);
    const interimState = (await statusOf(n1, closers)).partitionStates[lateP]!;
    expect(interimState).toMatchObject({ owner: interim, state: "owned" });

    // Calls straight to the stopped node: its own partitions, the one claimed meanwhile, another node's.
    const targets = [heldQ!, heldQ2!, lateQ!, lateQ!, others[0]!, heldQ!];
    const sent = targets.map((queue, i) => direct.enqueue(newTask("job", json({ stopped: i })), { queue, concurrencyKey: "k0" })
      .then((info) => ({ queue, info, atMs: Date.now() }), (error: unknown) => ({ queue, error, atMs: Date.now() })));
    // A round trip to another node: the client has written the calls above meanwhile.
    await statusOf(n1, closers);
    checker.phase = "n3 resumed";
    const resumedAt = Date.now();
    n3.child.kill("SIGCONT");
    const outcomes = await Promise.all(sent);

    const after = await eventually("n3 back as a new active incarnation in n1's view", async () => {
      const m = (await statusOf(n1, closers)).members.find((x) => x.nodeId === "n3");
      return m && m.incarnation !== incarnationBefore && m.state === 2 ? m : undefined;
    }, 20_000);
    // n1 can see the new registration in etcd before n3 has logged it: wait for the line.
    const rejoinedAt = await eventually("n3 to log its re-registration (cluster member active, after a fence)", async () =>
      logsOf(n3).find((l) => l.msg === "cluster member active" && (l.fences ?? 0) >= 1)?.time, 10_000);
    const fencedAt = logsOf(n3).find((l) => l.msg?.startsWith("fenced itself"))?.time;
    expect(fencedAt, "n3 logged that it fenced itself").toBeDefined();
    const own = await statusOf(n3, closers);
    expect(own).toMatchObject({ phase: "active", serving: true, incarnation: after.incarnation });
    expect(own.fences).toBeGreaterThanOrEqual(1);

    // Nothing the stopped node received was acknowledged on its old registration. The calls
    // went as one EnqueueBatch (the SDK coalesces them), which n3 splits by owner: the items
    // of partitions another node holds are forwarded to it, and that live owner may
    // acknowledge them at any time; the items of n3's own partitions are refused, or served
    // only after it registered again.
    const report: string[] = [];
    for (const o of outcomes) {
      if ("info" in o) {
        report.push(`${o.queue}: acknowledged at ${o.atMs - rejoinedAt!} ms from the re-registration`);
        if (o.queue === heldQ || o.queue === heldQ2) {
          expect(o.atMs, `the enqueue to ${o.queue} sent to the stopped node was acknowledged before it registered again`).toBeGreaterThanOrEqual(rejoinedAt!);
        }
        checker.acknowledged.set(o.info.id, `${o.queue}/k0`);
      } else {
        const e = o.error;
        report.push(`${o.queue}: refused ${e instanceof ConveyorError ? `${e.code}/${e.reason}` : String(e)}`);
        // Refused with a retryable answer that says why, never a silent loss.
        expect(e).toBeInstanceOf(ConveyorError);
        expect((e as ConveyorError).code).toBe("UNAVAILABLE");
      }
    }

    // Its partitions are claimed again, at higher epochs; the one claimed meanwhile comes
    // to it by a handoff (with its rows), at a higher epoch than the interim owner's.
    await eventually("n3 to hold its partitions again at new epochs, the late one included", async () => {
      const states = (await statusOf(n1, closers)).partitionStates;
      const again = heldPartitions.every((p) => states[p]!.owner === "n3" && states[p]!.state === "owned" && states[p]!.epoch > epochsBefore.get(p)!.epoch);
      const late = states[lateP]!;
      if (again && late.owner === "n3" && late.state === "owned" && late.epoch > interimState.epoch) return true;
      const show = (p: number) => `${p}: ${states[p]!.owner} ${states[p]!.state} @${states[p]!.epoch}`;
      throw new Error(`held (before @${heldPartitions.map((p) => epochsBefore.get(p)!.epoch).join(",")}): ${heldPartitions.map(show).join("; ")}; ` +
        `late (interim @${interimState.epoch}): ${show(lateP)}`);
    }, 30_000);

    // Every acknowledged task is intact: a worker on n1 runs each one to completion.
    checker.phase = "draining";
    runWorker(checker, n1.grpcAddress, [...used, lateQ!], closers);
    const verdict = await checker.verify(producer, LEASE_TTL_MS);
    console.log(`SIGSTOP of n3 past its ${TTL_S}s lease, then SIGCONT: after SIGCONT it fenced itself at +${fencedAt! - resumedAt} ms, ` +
      `the answers to the calls sent while it was stopped came at +${Math.min(...outcomes.map((o) => o.atMs)) - resumedAt}..${Math.max(...outcomes.map((o) => o.atMs)) - resumedAt} ms, re-registered as a new incarnation; calls it got while stopped: ${report.join("; ")}; ` +
      `${verdict.acknowledged} acknowledged tasks, all completed`);
    expect(checker.failures, describeFailures(checker)).toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
  });
});
