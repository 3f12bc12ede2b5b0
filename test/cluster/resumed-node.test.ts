/**
 * A node paused past its member TTL with long polls parked on it (issue 34, item 1), with
 * real processes: three nodes on one etcd, n3 holding a queue that a worker long-polls on
 * n3, plus one raw Lease call parked there. A delayed task in that queue comes due while
 * n3 is stopped, so the moment n3 wakes its grain makes work dispatchable while n3 can no
 * longer prove its registration alive. Before the fix that turn's parked-call service threw
 * WRONG_OWNER/FENCED in a microtask and the process exited with code 1.
 *
 * After SIGCONT: n3 is still running; the parked call is answered with a retryable
 * UNAVAILABLE (FENCED) instead of hanging or killing the node; n3 registers again as a new
 * incarnation and acknowledges enqueues again (the time from SIGCONT is printed); every
 * task acknowledged before and after the pause runs to completion.
 */
import { describe, expect, it } from "vitest";
import { Client, ConveyorError, json, newTask } from "../../src/index.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { WorkerService } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { Checker, describeFailures } from "../support/checker.js";
import { clusterFixture, queuesOn, startCluster, statusOf } from "../support/cluster.js";
import { eventually } from "../support/node-process.js";
import { Mux, Worker } from "../../src/index.js";

const TTL_S = 3;
const LEASE_TTL_MS = 30_000;
const fixture = clusterFixture();
const { nodes, closers } = fixture;

describe("a node resumed after a pause past its member TTL, with parked long polls (real processes)", { timeout: 150_000 }, () => {
  it("SIGSTOP past the TTL, then SIGCONT: the node keeps running, parked calls get UNAVAILABLE, it serves again, nothing is lost", async () => {
    const ids = ["n1", "n2", "n3"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, TTL_S, closers);
    const [n1, n3] = [byId.get("n1")!, byId.get("n3")!];
    const queue = queuesOn(ids, 1).get("n3")![0]!;
    const checker = new Checker();
    const producer = new Client({ address: n1.grpcAddress });
    closers.push(() => producer.close());
    const enqueue = async (client: Client, i: number, processAt?: Date) => {
      const info = await client.enqueue(newTask("job", json({ i })), { queue, ...(processAt ? { processAt } : {}) });
      checker.acknowledged.set(info.id, `${queue}/`);
      return info;
    };

    // A worker long-polling n3 for its queue (30 s polls: parked across the pause).
    const worker = new Worker({
      address: n3.grpcAddress, queues: [queue], concurrency: 4, handleSignals: false, leaseWaitMs: 30_000, logger: null,
      onError: (error, context) => checker.workerReports.push({ context, error }),
      mux: new Mux().handle("job", checker.track(async () => {})),
    });
    closers.push(() => worker.stop());
    worker.start();
    for (let i = 0; i < 10; i++) await enqueue(producer, i);
    await eventually("the tasks enqueued before the pause to run", async () => (checker.allRan() ? true : undefined), 20_000);

    // One raw Lease call parked on n3, to see exactly what a parked call is answered.
    const raw = new RpcChannel({ address: n3.grpcAddress });
    closers.push(() => raw.close());
    const parked = raw.service(WorkerService).lease(
      { workerId: "parked-probe", queues: [{ queue, weight: 1 }], maxDeliveries: 1, waitMs: 40_000 }, { timeoutMs: 60_000 },
    ).then((res) => ({ res, atMs: Date.now() }), (error: unknown) => ({ error, atMs: Date.now() }));
    const info = raw.service(AdminService);
    await eventually("the worker's and the probe's Lease calls to be parked on n3", async () =>
      ((await info.getClusterInfo({}, { timeoutMs: 5_000 })).parkedLeases >= 2 ? true : undefined), 10_000);

    // A task that comes due while n3 is stopped: its grain's timer fires as n3 wakes.
    const dueAt = new Date(Date.now() + 1_500);
    await enqueue(producer, 100, dueAt);
    const incarnationBefore = (await statusOf(n3, closers)).incarnation;

    n3.child.kill("SIGSTOP");
    checker.phase = "n3 stopped";
    await eventually("n3's lease to end while it is stopped (n1 no longer lists it)", async () =>
      ((await statusOf(n1, closers)).members.some((m) => m.nodeId === "n3") ? undefined : true), TTL_S * 1000 + 10_000);
    await eventually("the delayed task to be due", async () => (Date.now() > dueAt.getTime() + 200 ? true : undefined), 5_000);

    const resumedAt = Date.now();
    n3.child.kill("SIGCONT");
    checker.phase = "n3 resumed";

    // The parked call gets a retryable answer that says why.
    const answer = await parked;
    expect("error" in answer ? answer.error : answer.res, "the parked Lease call's answer").toBeInstanceOf(ConveyorError);
    const refusal = (answer as { error: ConveyorError }).error;
    expect({ code: refusal.code, reason: refusal.reason }).toEqual({ code: "UNAVAILABLE", reason: "FENCED" });

    // n3 serves again: an enqueue sent to it directly is acknowledged.
    const direct = new Client({ address: n3.grpcAddress });
    closers.push(() => direct.close());
    const refusedMeanwhile: string[] = [];
    await eventually("n3 to acknowledge an enqueue again", async () => {
      try {
        return await enqueue(direct, 200);
      } catch (error) {
        if (!(error instanceof ConveyorError) || error.code !== "UNAVAILABLE") throw error;
        refusedMeanwhile.push(error.reason);
        return undefined;
      }
    }, 20_000);
    const servingAfterMs = Date.now() - resumedAt;
    expect(n3.child.exitCode, `n3 exited: ${n3.stderr}`).toBeNull();
    const own = await statusOf(n3, closers);
    expect(own).toMatchObject({ phase: "active", serving: true });
    expect(own.incarnation).not.toBe(incarnationBefore);
    expect(own.fences).toBeGreaterThanOrEqual(1);

    for (let i = 0; i < 10; i++) await enqueue(producer, 300 + i);
    checker.phase = "draining";
    const verdict = await checker.verify(producer, LEASE_TTL_MS);
    expect(n3.child.exitCode, `n3 exited: ${n3.stderr}`).toBeNull();
    expect(n3.stderr).not.toMatch(/uncaught|unhandled/i);
    console.log(`SIGSTOP of n3 past its ${TTL_S}s TTL with 2 parked Lease calls, then SIGCONT: the parked probe was answered ` +
      `${refusal.code}/${refusal.reason} at +${answer.atMs - resumedAt} ms; n3 acknowledged an enqueue again at +${servingAfterMs} ms ` +
      `(refused meanwhile: ${refusedMeanwhile.join(", ") || "none"}); ${verdict.acknowledged} acknowledged tasks, all completed; ` +
      `worker reports: ${checker.workerReports.map((r) => `${r.context}: ${r.error instanceof ConveyorError ? r.error.reason : String(r.error)}`).join("; ") || "none"}`);
    expect(checker.failures, describeFailures(checker)).toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.notCompleted).toEqual([]);
    expect(verdict.unexplainedReruns).toEqual([]);
  });
});
