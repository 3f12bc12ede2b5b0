/**
 * The cluster's only etcd killed under load and started again 3 s later (issue 34, item
 * 2), with real processes: a single-member etcd, three conveyord nodes with the default
 * 5 s member TTL, one producer loop per queue (queues on every node) and a worker. The
 * nodes fence themselves 3.75 s after their last renewal (by design); what must hold:
 * - while etcd cannot be reached, every refused call is UNAVAILABLE with a documented
 *   reason, never INTERNAL (before: the etcd client's BrokenCircuitError came out as
 *   INTERNAL);
 * - once etcd answers again, every node registers again and serves writes within
 *   seconds (before: ~15 s more, every registration refused by the client's circuit
 *   breaker); the longest enqueue gap per queue and when each queue was served again
 *   after etcd answered are printed;
 * - no node process exits, and every acknowledged task runs to completion.
 */
import { describe, expect, it } from "vitest";
import { Client, ConveyorError, json, newTask } from "../../src/index.js";
import { Checker, describeFailures, runWorker } from "../support/checker.js";
import { clusterFixture, queuesOn, startCluster, statusOf } from "../support/cluster.js";
import { eventually } from "../support/node-process.js";

const TTL_S = 5;
const LEASE_TTL_MS = 30_000;
const DOWNTIME_MS = 3_000;
/** Reasons a call may be refused with while etcd is away (all documented, all UNAVAILABLE). */
const EXPECTED_REASONS = new Set(["FENCED", "OWNER_DOWN", "ETCD_UNAVAILABLE", "NO_ACTIVE_MEMBER", "WRONG_OWNER", "RELOCATING"]);
const fixture = clusterFixture();
const { nodes, closers } = fixture;

interface QueueLoad {
  queue: string;
  /** When each acknowledged enqueue was sent and answered (Date.now()). */
  acks: Array<{ sentAt: number; at: number }>;
  refusals: Map<string, number>;
}

describe("etcd restarted under load (real processes, single-member etcd)", { timeout: 240_000 }, () => {
  it("kill -9 of etcd, started again 3 s later: calls answer UNAVAILABLE meanwhile, every node serves again soon after, nothing is lost", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, TTL_S, closers);
    const all = ids.map((id) => byId.get(id)!);
    const queues = [...queuesOn(ids, 2).values()].flat();
    const checker = new Checker();
    const producer = new Client({ address: byId.get("n1")!.grpcAddress });
    closers.push(() => producer.close());
    runWorker(checker, byId.get("n2")!.grpcAddress, queues, closers);

    let stopping = false;
    const loads: QueueLoad[] = queues.map((queue) => ({ queue, acks: [], refusals: new Map() }));
    const unexpected: string[] = [];
    const loops = loads.map(async (load, n) => {
      for (let i = 0; !stopping; i++) {
        const sentAt = Date.now();
        try {
          const info = await producer.enqueue(newTask("job", json({ n, i })), { queue: load.queue });
          checker.acknowledged.set(info.id, `${load.queue}/`);
          load.acks.push({ sentAt, at: Date.now() });
        } catch (error) {
          const tag = error instanceof ConveyorError ? `${error.code}/${error.reason}` : String(error);
          load.refusals.set(tag, (load.refusals.get(tag) ?? 0) + 1);
          if (!(error instanceof ConveyorError) || error.code !== "UNAVAILABLE" || !EXPECTED_REASONS.has(error.reason)) {
            unexpected.push(`${load.queue}: ${tag}: ${error instanceof Error ? error.message : ""}`);
          }
        }
        // Steady load: ~20 enqueues/s per queue, never a tight loop on refusals.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    });
    await eventually("every queue in use before the kill", async () => (loads.every((l) => l.acks.length >= 10) ? true : undefined), 30_000);

    const etcdMember = fixture.etcd.members[0]!;
    checker.phase = "etcd killed";
    const killedAt = Date.now();
    await etcdMember.kill();
    // The fault's length, not a synchronisation: etcd stays away this long.
    await new Promise((resolve) => setTimeout(resolve, DOWNTIME_MS));
    await fixture.etcd.restart(0);
    const backAt = Date.now();
    checker.phase = "etcd back";

    // Every queue acknowledges an enqueue sent after etcd answered again.
    await eventually("every queue to acknowledge an enqueue sent after etcd is back", async () =>
      (loads.every((l) => l.acks.some((a) => a.sentAt >= backAt)) ? true : undefined), 60_000);
    const servedAfterMs = loads.map((l) => l.acks.find((a) => a.sentAt >= backAt)!.at - backAt);
    const views = await eventually("every node active and serving again", async () => {
      const v = await Promise.all(all.map((n) => statusOf(n, closers)));
      return v.every((s) => s.phase === "active" && s.serving) ? v : undefined;
    }, 30_000);
    await eventually("a few more enqueues on every queue", async () =>
      (loads.every((l) => l.acks.filter((a) => a.sentAt >= backAt).length >= 5) ? true : undefined), 30_000);
    stopping = true;
    await Promise.all(loops);
    checker.phase = "draining";
    const verdict = await checker.verify(producer, LEASE_TTL_MS);

    const gaps = loads.map((l) => {
      let gap = 0;
      for (let i = 1; i < l.acks.length; i++) gap = Math.max(gap, l.acks[i]!.at - l.acks[i - 1]!.at);
      return gap;
    });
    const downMs = backAt - killedAt;
    console.log(`etcd killed and started again ${downMs} ms later (healthy at that point): longest enqueue gap per queue ` +
      `${loads.map((l, i) => `${l.queue} ${gaps[i]} ms`).join(", ")} (goal ${downMs + 2_000} ms); first acknowledged enqueue ` +
      `sent after etcd was back: +${servedAfterMs.join(", +")} ms; refusals: ` +
      `${loads.map((l) => `${l.queue} {${[...l.refusals].map(([k, v]) => `${k}: ${v}`).join(", ")}}`).join("; ")}; ` +
      `fences ${views.map((v) => v.fences).join(", ")}; ${verdict.acknowledged} acknowledged, ${verdict.deliveries} runs`);

    expect(unexpected.slice(0, 10), "calls refused with something else than a documented UNAVAILABLE").toEqual([]);
    for (const n of all) expect(n.child.exitCode, `a node exited: ${n.stderr}`).toBeNull();
    expect(checker.failures, describeFailures(checker)).toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
    // Generous on a shared 2-core machine (the goal is the downtime + 2 s; before the fix, ~19 s).
    for (const [i, gap] of gaps.entries()) expect(gap, `longest enqueue gap of ${loads[i]!.queue}`).toBeLessThan(downMs + 10_000);
  });
});
