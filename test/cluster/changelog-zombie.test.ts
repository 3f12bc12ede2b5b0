/**
 * A zombie owner with the changelog (issue 14, test 2), with real processes: one etcd,
 * three nats-server with JetStream (R3), three conveyord with `cluster_nats` at the
 * default member TTL (5 s). A producer per queue on n1 and a worker on n2 run keyed tasks
 * under a per-key limit of 1 over queues of all three nodes; n3, which owns busy queues,
 * gets SIGSTOP and stays stopped until its lease has ended and the survivors have taken
 * its partitions over from the log (placement rule 5, catch-up, fence) and serve them.
 * Meanwhile calls are sent straight to the stopped n3 over connections it had accepted
 * (enqueues with ids of our choosing on its queues and on the other nodes', sent together,
 * so the SDK makes them one EnqueueBatch, which n3 splits by owner; and a Lease of its
 * queues), so their bytes wait in its socket for the moment it wakes, before it has
 * noticed anything. Then SIGCONT. What is checked:
 * - none of the calls it received while stopped is acknowledged by it on its old claim:
 *   each is refused UNAVAILABLE (retryable; then nothing of it is on the log or in the
 *   cluster) or, if served, served by a live owner: an acknowledged enqueue's insert, a
 *   delivery's lease, is on the log after the new owner's fence (so is any insert of a
 *   call whose connection the client dropped, UNREACHABLE: its outcome is unknown);
 * - the log, read afterwards: on each of n3's partitions, n3's last fence, then the new
 *   owner's fence at a higher epoch, appended before SIGCONT, then (once n3 has its share
 *   back by handoff) n3's fence at a higher epoch still. A records entry does not name
 *   who appended it, so what the log itself can show is this order, plus: no refused
 *   probe's task is anywhere on it (or in the cluster), and every acknowledged task of
 *   n3's queues is on it. That nothing the zombie appended after the fence was stored
 *   rests on JetStream's compare-and-set (the contract test's fencing case); the zombie's
 *   appends the log refused are counted (conveyor_changelog_append_failures_total{reason="fenced"});
 * - n3 fences itself, registers again as a new incarnation, and gets its share back at
 *   higher epochs;
 * - the checker: 0 acknowledged tasks lost, every one completed, a task ran twice only
 *   after a lease lapse, the per-key limit of 1 never exceeded (through the takeover and
 *   the handback: the rows and memory n3 had before the pause are stale by then);
 * - every error an SDK call saw was UNAVAILABLE, on n3's queues, while it was stopped or
 *   just after it woke.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, ConveyorError, json, newTask } from "../../src/index.js";
import { WorkerService, Outcome, type LeaseResponse } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import type { JetStreamChangeLog } from "../../src/changelog/jetstream-change-log.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { openLogReader, readPartition, type ReadEntry } from "../support/changelog-reader.js";
import { Checker, describeFailures, runProducer, runWorker } from "../support/checker.js";
import { clusterFixture, queuesOn, startCluster, statusOf } from "../support/cluster.js";
import { startNats, type NatsCluster } from "../support/nats.js";
import { eventually, type NodeProcess } from "../support/node-process.js";
import { Ring } from "../support/ring.js";

/** The nodes' default member TTL (s): the scenario is a pause past it. */
const MEMBER_TTL_S = 5;
/** The nodes' default lease TTL: a rerun sooner than this after the first run is unexplained. */
const LEASE_TTL_MS = 30_000;
const fixture = clusterFixture();
const { nodes, closers } = fixture;
let nats: NatsCluster | undefined;
let reader: JetStreamChangeLog | undefined;

beforeAll(async () => {
  nats = await startNats({ size: 3 });
});
afterAll(async () => {
  await reader?.close();
  await nats?.stop();
});

interface LogLine {
  msg?: string;
  time?: number;
  fences?: number;
  partition?: number;
  why?: string;
}
const logsOf = (node: NodeProcess) => node.logs.map((l) => JSON.parse(l) as LogLine);
const ring64 = new Ring(["x"], 1, 64);

/** A counter's value on a node's /metrics (0 when absent); `labels` as printed, e.g. `reason="fenced"`. */
async function counter(node: NodeProcess, name: string, labels = ""): Promise<number> {
  const prefix = labels ? `${name}{${labels}} ` : `${name} `;
  const line = (await node.metrics()).split("\n").find((l) => l.startsWith(prefix));
  return line ? Number(line.slice(prefix.length)) : 0;
}

describe("a zombie owner with the changelog (real processes: etcd, three nats-server, three nodes)", { timeout: 150_000 }, () => {
  it("SIGSTOP of a busy owner past its lease, then SIGCONT: it acknowledges nothing after the new owner's fence, rejoins as a new incarnation; nothing acknowledged is lost; the per-key limit holds", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, MEMBER_TTL_S, closers, { cluster_nats: nats!.urls.join(",") });
    const [n1, n2, n3] = ids.map((id) => byId.get(id)!) as [NodeProcess, NodeProcess, NodeProcess];
    const placed = queuesOn(ids, 2);
    const queues = [...placed.values()].flat();
    const n3Queues = placed.get("n3")!;
    const n3Partitions = [...new Set(n3Queues.map((q) => ring64.partitionOf(q)))];
    const admin = fixture.client(n1);
    for (const q of queues) await admin.admin.setConcurrencyLimit(q, 1);

    const checker = new Checker();
    // One producer per queue, each on its own connection to n1: a call n1 forwarded to the
    // stopped n3 holds up its own queue's producer only (one client would batch them all).
    const producers = queues.map((q) => {
      const client = new Client({ address: n1.grpcAddress, connectTimeoutMs: 60_000 });
      closers.push(() => client.close());
      return runProducer(checker, client, [q]);
    });
    runWorker(checker, n2.grpcAddress, queues, closers);
    const ackedOn = (qs: readonly string[]) => [...checker.acknowledged.values()].filter((slot) => qs.includes(slot.split("/")[0]!)).length;
    await eventually("work under way on every queue (20 acknowledged on each)", async () =>
      (queues.every((q) => ackedOn([q]) >= 20) && checker.deliveries.length >= 100 ? true : undefined), 60_000);

    const before = await statusOf(n1, closers);
    for (const p of n3Partitions) expect(before.partitionStates[p], `partition ${p} before the pause`).toMatchObject({ owner: "n3", state: "owned" });
    const epochBefore = new Map(n3Partitions.map((p) => [p, Number(before.partitionStates[p]!.epoch)]));
    const incarnationBefore = (await statusOf(n3, closers)).incarnation;

    // Connections n3 accepted while awake: calls sent on them while it is stopped sit in its socket until it wakes.
    const direct = new Client({ address: n3.grpcAddress, timeoutMs: 60_000 });
    closers.push(() => direct.close());
    const probeTag = `z${Date.now().toString(36)}`;
    await direct.enqueue(newTask("job", json({ warm: true })), { queue: n3Queues[0]!, concurrencyKey: "k0", taskId: `${probeTag}-warm` })
      .then((info) => checker.acknowledged.set(info.id, `${n3Queues[0]}/k0`));
    const directWorker = new RpcChannel({ address: n3.grpcAddress });
    closers.push(() => directWorker.close());
    const workerRpc = directWorker.service(WorkerService);
    await workerRpc.lease({ workerId: `${probeTag}-worker`, queues: [{ queue: n3Queues[0]!, weight: 1 }], maxDeliveries: 1, waitMs: 0, types: ["no-such-type"] }, { timeoutMs: 10_000 });

    // The pause.
    checker.phase = "n3 stopped";
    const stoppedAt = performance.now();
    n3.child.kill("SIGSTOP");
    await eventually("n3's lease to end while it is stopped (n1 no longer lists it)", async () =>
      ((await statusOf(n1, closers)).members.some((m) => m.nodeId === "n3") ? undefined : true), MEMBER_TTL_S * 1000 + 10_000);
    const leaseEndedMs = performance.now() - stoppedAt;
    // Its partitions are taken over from the log and served while it is stopped: an
    // enqueue on each of its queues, through a fresh connection to n1, is acknowledged
    // (a claimed partition is served only once its new owner fenced the log).
    const fresh = new Client({ address: n1.grpcAddress, timeoutMs: 5_000 });
    closers.push(() => fresh.close());
    const servedAtMs = new Map<string, number>();
    await eventually("each of n3's queues to be served by a live node while n3 is stopped", async () => {
      await Promise.all(n3Queues.filter((q) => !servedAtMs.has(q)).map(async (q) => {
        const info = await fresh.enqueue(newTask("job", json({ takeover: true })), { queue: q, concurrencyKey: "k1" }).catch(() => undefined);
        if (!info) return;
        checker.acknowledged.set(info.id, `${q}/k1`);
        servedAtMs.set(q, performance.now() - stoppedAt);
      }));
      return servedAtMs.size === n3Queues.length ? true : undefined;
    }, 30_000);
    const takeover = await statusOf(n1, closers);
    const takeoverHolders = new Map(n3Partitions.map((p) => [p, { owner: takeover.partitionStates[p]!.owner, epoch: Number(takeover.partitionStates[p]!.epoch) }]));
    for (const [p, s] of takeoverHolders) {
      expect(["n1", "n2"], `partition ${p}'s holder while n3 is stopped`).toContain(s.owner);
      expect(s.epoch, `partition ${p}'s takeover epoch`).toBeGreaterThan(epochBefore.get(p)!);
    }

    // Calls straight to the stopped node: enqueues on its partitions (ids of our choosing,
    // to look for on the log), one on each other node's, and a Lease of its queues.
    const probeQueues = [n3Queues[0]!, n3Queues[1]!, n3Queues[0]!, placed.get("n1")![0]!, placed.get("n2")![0]!];
    const probes = probeQueues.map((queue, i) => {
      const id = `${probeTag}-${i}`;
      return direct.enqueue(newTask("job", json({ zombie: i })), { queue, concurrencyKey: "k2", taskId: id })
        .then((info) => ({ id, queue, info, atMs: Date.now() }), (error: unknown) => ({ id, queue, error, atMs: Date.now() }));
    });
    const leaseProbe = workerRpc.lease(
      { workerId: `${probeTag}-worker`, queues: n3Queues.map((queue) => ({ queue, weight: 1 })), maxDeliveries: 4, waitMs: 0, pollOwners: true },
      { timeoutMs: 60_000 },
    ).then((res: LeaseResponse) => ({ res, atMs: Date.now() }), (error: unknown) => ({ error, atMs: Date.now() }));
    // A round trip to another node: the client has written the calls above meanwhile.
    await statusOf(n1, closers);
    checker.phase = "n3 resumed";
    const stoppedForMs = performance.now() - stoppedAt;
    const resumedAt = Date.now();
    n3.child.kill("SIGCONT");
    const outcomes = await Promise.all(probes);
    const leaseOutcome = await leaseProbe;

    // n3 fences itself and registers again, as a new incarnation.
    const rejoined = await eventually("n3 back as a new active incarnation in n1's view", async () => {
      const m = (await statusOf(n1, closers)).members.find((x) => x.nodeId === "n3");
      return m && m.incarnation !== incarnationBefore && m.state === 2 ? m : undefined;
    }, 30_000);
    const rejoinedAt = await eventually("n3 to log its re-registration (cluster member active, after a fence)", async () =>
      logsOf(n3).find((l) => l.msg === "cluster member active" && (l.fences ?? 0) >= 1)?.time, 10_000);
    const fencedAt = logsOf(n3).find((l) => l.msg?.startsWith("fenced itself"))?.time;
    expect(fencedAt, "n3 logged that it fenced itself").toBeDefined();
    const own = await statusOf(n3, closers);
    expect(own).toMatchObject({ phase: "active", serving: true, incarnation: rejoined.incarnation });
    expect(own.fences).toBeGreaterThanOrEqual(1);

    // What the stopped node did with the calls it got: refused (retryable), or served by a
    // live owner (checked on the log below). UNREACHABLE is the client's own verdict (its
    // keep-alive ping to the stopped node went unanswered, so it dropped the connection):
    // the node may still have received and served the call, so its outcome is unknown.
    const report: string[] = [];
    const refusedIds: string[] = [];
    const servedProbes: Array<{ id: string; queue: string }> = [];
    const unknownProbes: Array<{ id: string; queue: string }> = [];
    const describe = (e: unknown) => (e instanceof ConveyorError ? `${e.code}/${e.reason}` : String(e));
    for (const o of outcomes) report.push(`${o.queue}: ${"info" in o ? `acknowledged at +${o.atMs - resumedAt} ms` : `${describe(o.error)} at +${o.atMs - resumedAt} ms`}`);
    report.push(`lease: ${"res" in leaseOutcome ? `${leaseOutcome.res.deliveries.length} deliveries` : describe(leaseOutcome.error)} at +${leaseOutcome.atMs - resumedAt} ms`);
    console.log(`zombie: the calls n3 got while stopped: ${report.join("; ")}; ` +
      `errors: ${outcomes.map((o) => ("error" in o ? String(o.error) : "")).filter(Boolean).join(" | ")}`);
    for (const o of outcomes) {
      if ("info" in o) {
        checker.acknowledged.set(o.info.id, `${o.queue}/k2`);
        servedProbes.push({ id: o.id, queue: o.queue });
      } else {
        expect(o.error, `the enqueue to ${o.queue} sent to the stopped node`).toBeInstanceOf(ConveyorError);
        expect((o.error as ConveyorError).code).toBe("UNAVAILABLE");
        if ((o.error as ConveyorError).reason === "UNREACHABLE") unknownProbes.push({ id: o.id, queue: o.queue });
        else refusedIds.push(o.id);
      }
    }
    const probeLeases: string[] = [];
    if ("res" in leaseOutcome) {
      const deliveries = leaseOutcome.res.deliveries;
      // Served by a live owner: give them back at once (through n1, which routes each to its owner).
      for (const d of deliveries) probeLeases.push(d.leaseId);
      if (deliveries.length > 0) {
        const viaN1 = new RpcChannel({ address: n1.grpcAddress });
        closers.push(() => viaN1.close());
        // Retried while it is UNAVAILABLE, as the SDK's settles are (the partitions may be moving back to n3 now).
        await eventually("the probe's deliveries given back", () => viaN1.service(WorkerService).settle({
          workerId: `${probeTag}-worker`,
          settlements: deliveries.flatMap((d) => d.tasks.map((t) => ({ queue: d.queue, leaseId: d.leaseId, taskId: t.id, outcome: Outcome.RELEASED }))),
        }, { timeoutMs: 10_000 }).then(() => true, (e: unknown) => {
          if (e instanceof ConveyorError && e.code === "UNAVAILABLE") return undefined;
          throw e;
        }), 30_000);
      }
    } else {
      expect(leaseOutcome.error, "the Lease sent to the stopped node").toBeInstanceOf(ConveyorError);
      expect((leaseOutcome.error as ConveyorError).code).toBe("UNAVAILABLE");
    }

    // n3 gets its share back by handoff, at epochs above the takeover's.
    checker.phase = "n3 rejoined";
    await eventually("n3 to hold its partitions again, at epochs above the takeover's", async () => {
      const states = (await statusOf(n1, closers)).partitionStates;
      return n3Partitions.every((p) => states[p]!.owner === "n3" && states[p]!.state === "owned" && Number(states[p]!.epoch) > takeoverHolders.get(p)!.epoch) ? true : undefined;
    }, 60_000);
    checker.phase = "after n3's return";
    const atReturn = new Map(queues.map((q) => [q, ackedOn([q])]));
    await eventually("work to go on on every queue after n3's return (20 more acknowledged on each)", async () =>
      (queues.every((q) => ackedOn([q]) >= atReturn.get(q)! + 20) ? true : undefined), 60_000);
    await Promise.all(producers.map((p) => p.stop()));
    const verdict = await checker.verify(admin, LEASE_TTL_MS);
    const zombieFenced = await counter(n3, "conveyor_changelog_append_failures_total", 'reason="fenced"');
    const closedOnN3 = logsOf(n3).filter((l) => l.msg === "changelog partition closed on this node").map((l) => `p${String(l.partition)}: ${String(l.why)}`);

    // The log, read afterwards: what it shows is gathered first, and checked after the report.
    reader = await openLogReader(nats!);
    const logReport: string[] = [];
    const problems: string[] = [];
    const check = (ok: boolean, what: string) => {
      if (!ok) problems.push(what);
    };
    const onLog = new Map<string, number>();
    const leasedOnLog = new Map<string, number>();
    const probePartitions = [...new Set(probeQueues.map((q) => ring64.partitionOf(q)))];
    for (const p of [...new Set([...n3Partitions, ...probePartitions])]) {
      const entries: ReadEntry[] = await readPartition(reader, p);
      for (const e of entries) {
        for (const id of e.inserted) onLog.set(id, e.seq);
        for (const l of e.leased) leasedOnLog.set(l, e.seq);
      }
      if (!n3Partitions.includes(p)) continue;
      const fences = entries.filter((e) => e.kind === "fence");
      const heldBy = takeoverHolders.get(p)!;
      const i = fences.findIndex((f) => f.fence!.node === heldBy.owner && f.fence!.epoch === heldBy.epoch);
      if (i < 0) {
        problems.push(`partition ${p}: no fence of the new owner (${heldBy.owner} @${heldBy.epoch}) on the log; fences: ${JSON.stringify(fences.map((f) => f.fence))}`);
        continue;
      }
      const takeoverFence = fences[i]!;
      const previous = fences[i - 1]?.fence;
      const next = fences[i + 1];
      // The fence before it is n3's at the epoch it held before the pause: nobody wrote in between but n3.
      check(previous?.node === "n3" && previous.epoch === epochBefore.get(p), `partition ${p}: the fence before the takeover's is ${JSON.stringify(previous)}, not n3's @${epochBefore.get(p)}`);
      // It was on the log before the zombie woke.
      check(takeoverFence.fence!.atMs < resumedAt, `partition ${p}: the takeover's fence was made ${takeoverFence.fence!.atMs - resumedAt} ms after SIGCONT`);
      // The one after it is n3's again, claimed after it registered again, at a higher epoch.
      check(next?.fence?.node === "n3" && next.fence.epoch > heldBy.epoch && next.fence.atMs >= rejoinedAt!,
        `partition ${p}: the fence after the takeover's is ${JSON.stringify(next?.fence)}, not n3's at a higher epoch after it registered again`);
      const segment = entries.filter((e) => e.seq > takeoverFence.seq && (next === undefined || e.seq < next.seq));
      logReport.push(`p${p}: n3 @${previous?.epoch} → ${heldBy.owner} @${heldBy.epoch} (seq ${takeoverFence.seq}, then ${segment.length} entries) → ${next?.fence?.node} @${next?.fence?.epoch}`);
      // What was acknowledged of the calls n3 got while stopped (or may have been, when the
      // client gave up) was written by a live owner: after the takeover's fence.
      for (const x of servedProbes.filter((y) => ring64.partitionOf(y.queue) === p)) {
        check((onLog.get(x.id) ?? 0) > takeoverFence.seq, `the acknowledged probe ${x.id} is at ${onLog.get(x.id)} on the log, not after the takeover's fence at ${takeoverFence.seq}`);
      }
      for (const x of unknownProbes.filter((y) => ring64.partitionOf(y.queue) === p && onLog.has(y.id))) {
        check(onLog.get(x.id)! > takeoverFence.seq, `the probe ${x.id} (outcome unknown to the client) is at ${onLog.get(x.id)} on the log, before the takeover's fence at ${takeoverFence.seq}`);
      }
      for (const l of probeLeases) if (leasedOnLog.has(l)) check(leasedOnLog.get(l)! > takeoverFence.seq, `the probe's delivery ${l} is on the log before the takeover's fence`);
    }
    for (const x of servedProbes) check(onLog.has(x.id), `the acknowledged probe ${x.id} (${x.queue}) is not on the log`);
    for (const l of probeLeases) check(leasedOnLog.has(l), `the probe's delivery ${l} is not on the log`);
    // Nothing of a call the node refused was written anywhere, or exists.
    for (const id of refusedIds) {
      check(!onLog.has(id), `the refused probe ${id} is on the log (at ${onLog.get(id)})`);
      const found = await admin.getTask(id).then(() => "found", (e: unknown) => (e instanceof ConveyorError ? e.reason : String(e)));
      check(found === "TASK_NOT_FOUND", `the refused probe ${id} in the cluster: ${found}`);
    }
    // Every acknowledged task of n3's queues is on the log (what a takeover rebuilds from).
    const missing = [...checker.acknowledged].filter(([id, slot]) => n3Queues.includes(slot.split("/")[0]!) && !onLog.has(id)).map(([id]) => id);
    check(missing.length === 0, `acknowledged tasks of n3's queues missing from the log: ${missing.join(", ")}`);

    const servedMs = [...servedAtMs.values()];
    console.log(`zombie: n3 stopped ${Math.round(stoppedForMs)} ms (member TTL ${MEMBER_TTL_S} s; its lease ended at +${Math.round(leaseEndedMs)} ms; ` +
      `its queues served by n1/n2 from +${Math.round(Math.min(...servedMs))}..${Math.round(Math.max(...servedMs))} ms); after SIGCONT it fenced itself at +${fencedAt! - resumedAt} ms, ` +
      `re-registered at +${rejoinedAt! - resumedAt} ms; calls it got while stopped: ${report.join("; ")}` +
      `${unknownProbes.length ? ` (of those the client gave up on, ${unknownProbes.filter((x) => onLog.has(x.id)).length} were stored by their live owners)` : ""}; ` +
      `its appends refused by the log after waking: ${zombieFenced}, partitions it closed on the log: ${closedOnN3.join(", ") || "none"}; log: ${logReport.join("; ")}; ` +
      `${verdict.acknowledged} tasks acknowledged, ${verdict.deliveries} runs, max per key ${verdict.maxPerKey}; ` +
      `${checker.failures.length} failed SDK calls${checker.failures.length ? `:\n${describeFailures(checker)}` : ""}`);
    expect(problems, "what the log shows").toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
    expect(verdict.maxPerKey).toBe(1);
    // Errors reached the SDK only as UNAVAILABLE, only for n3's queues, only around the pause.
    const unexpected = checker.failures.filter((f) => !((f.phase === "n3 stopped" || f.phase === "n3 resumed") && f.error instanceof ConveyorError
      && f.error.code === "UNAVAILABLE" && n3Queues.includes(f.op.replace(/^enqueue /, ""))));
    expect(unexpected, describeFailures(checker)).toEqual([]);
  });
});
