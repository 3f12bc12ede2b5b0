/**
 * Drain and move through the real CLI, with real processes (issue 13, test 4): an
 * operator drains a node (it keeps serving forwarded calls but holds no partition) and
 * moves one partition to another node, under load from a producer and a worker (the
 * SDK). The checker: every acknowledged enqueue ran, no SDK call failed, no task ran
 * twice, and the per-key limit stayed exact across every move: a key at its limit (a
 * long task leased on the old owner) stays at its limit on the new owner, so a second
 * task of that key does not start until the first has settled, though the queue moved
 * under it. Bad input through the CLI is refused, naming what is wrong, and changes
 * nothing; a drain outlives the drained node's restart.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type Client, Mux, Worker, json, newTask } from "../../src/index.js";
import type { GetClusterStatusResponse } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { clusterFixture, queuesOn, startCluster, statusOf as statusOfNode } from "../support/cluster.js";
import { eventually, NodeProcess, REPO_ROOT } from "../support/node-process.js";
import { Ring } from "../support/ring.js";

const fixture = clusterFixture();
const { nodes, closers } = fixture;
const CLI = join(REPO_ROOT, "bin/conveyor.js");
const statusOf = (node: NodeProcess) => statusOfNode(node, closers);

/** Runs the built CLI against `node`; never rejects on a non-zero exit. */
function conveyor(node: NodeProcess, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CONVEYOR_SERVER;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [CLI, "--server", node.grpcAddress, ...args], { cwd: REPO_ROOT, env, timeout: 90_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

async function ok(node: NodeProcess, ...args: string[]): Promise<string> {
  const run = await conveyor(node, ...args);
  expect(run, `conveyor ${args.join(" ")}`).toMatchObject({ code: 0, stderr: "" });
  return run.stdout;
}

const held = (s: GetClusterStatusResponse, node: string) => s.partitionStates.filter((p) => p.state === "owned" && p.owner === node).length;

/** What a refused call must leave as it was: drains, pins and who holds each partition. */
const placementOf = (s: GetClusterStatusResponse) => ({
  drained: s.drainedNodes, pins: s.partitionStates.filter((p) => p.pinnedTo).map((p) => [p.partition, p.pinnedTo]),
  holders: s.partitionStates.map((p) => `${p.owner}:${p.state}`),
});

const KEYS = ["k0", "k1", "k2"];

/** A producer enqueueing round-robin over `queues` until stopped, recording every acknowledged id and every failure. */
function runProducer(client: Client, queues: string[]) {
  const acknowledged = new Set<string>();
  const failures: unknown[] = [];
  let stop = false;
  const done = (async () => {
    for (let i = 0; !stop; i++) {
      try {
        const queue = queues[i % queues.length]!;
        acknowledged.add((await client.enqueue(newTask("job", json({ i })), { queue, concurrencyKey: KEYS[i % KEYS.length]! })).id);
      } catch (error) {
        failures.push(error);
      }
    }
  })();
  return { acknowledged, failures, stop: async () => { stop = true; await done; } };
}

/** Resolves when `resolve` is called: the test holds a long task open with it. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("cluster drain and move through the CLI (real processes)", { timeout: 150_000 }, () => {
  it("under load: move a partition with a key at its limit, drain a node, undo; nothing lost, no call fails, the limit stays exact", async () => {
    const ids = ["n1", "n2", "n3"];
    // A member TTL of 5 s: long enough that an overloaded test machine does not lapse a lease mid-test.
    const { byId } = await startCluster(fixture.etcd, ids, nodes, 5, closers);
    const [n1, n2, n3] = ids.map((id) => byId.get(id)!);
    const placed = queuesOn(ids, 3);
    const queues = [...placed.values()].flat();
    // The queue that moves: on n1 by the ring; its key "long" is held at its limit by a long task.
    const moving = placed.get("n1")![0]!;
    const p = new Ring(ids, 1).partitionOf(moving);
    const producer = fixture.client(n1!);
    for (const q of queues) await producer.admin.setConcurrencyLimit(q, 1);

    // The worker (on n3): runs every task, records the most handlers per (queue, key) at once.
    const ran = new Map<string, number>();
    const running = new Map<string, number>();
    let maxPerKey = 0;
    const longTask = deferred();
    const started = new Map<string, number>();
    const finished = new Map<string, number>();
    const worker = new Worker({
      address: n3!.grpcAddress, queues, concurrency: 16, handleSignals: false, leaseWaitMs: 500, logger: null,
      mux: new Mux().handle("job", async (task) => {
        const key = `${task.queue}/${task.concurrencyKey}`;
        running.set(key, (running.get(key) ?? 0) + 1);
        maxPerKey = Math.max(maxPerKey, running.get(key)!);
        await new Promise((resolve) => setTimeout(resolve, 5)); // long enough for two runs of one key to overlap if the limit failed
        running.set(key, running.get(key)! - 1);
        ran.set(task.id, (ran.get(task.id) ?? 0) + 1);
      }).handle("long", async (task) => {
        started.set(task.id, Date.now());
        if (started.size === 1) await longTask.promise;
        finished.set(task.id, Date.now());
      }),
    });
    closers.push(() => worker.stop());
    worker.start();
    const load = runProducer(producer, queues);
    const t0 = Date.now();
    const marks: Array<[string, number]> = [];
    const mark = (what: string) => marks.push([what, Date.now() - t0]);
    await eventually("load running on every queue", async () => (ran.size >= 50 ? true : undefined), 30_000);

    // Key "long" at its limit on n1: A is leased and running, B waits behind it.
    const a = await producer.enqueue(newTask("long", json({})), { queue: moving, concurrencyKey: "long" });
    await eventually("the long task to start on the worker", async () => (started.has(a.id) ? true : undefined), 20_000);
    mark('long started');
    const b = await producer.enqueue(newTask("long", json({})), { queue: moving, concurrencyKey: "long" });
    expect((await statusOf(n2!)).partitionStates[p]!.owner).toBe("n1");

    // Move the queue's partition to n2 through the CLI (it waits for the move by default).
    const moveStarted = Date.now();
    const moved = JSON.parse(await ok(n3!, "--json", "cluster", "move", String(p), "--to", "n2")) as Record<string, unknown>;
    expect(moved).toMatchObject({ fromNodeId: "n1", heldBy: "n2", pinnedTo: "n2", finished: true });
    expect(moved.partition ?? 0).toBe(p); // proto3 JSON leaves out a zero
    mark('moved');
    const moveMs = Date.now() - moveStarted;
    const afterMove = await statusOf(n1!);
    expect(afterMove.partitionStates[p]).toMatchObject({ owner: "n2", state: "owned", pinnedTo: "n2" });
    expect(afterMove.partitionOwners[p]).toBe("n2");
    expect(await ok(n1!, "cluster", "status", "--partitions")).toMatch(new RegExp(`\\n${p}\\s+n2\\s+\\d+\\s+owned\\s+n2\\s+n2`));

    // On n2 now, another key of the queue runs (so the worker polls n2 for it), but B does not: "long" is still at its limit.
    const c = await producer.enqueue(newTask("job", json({})), { queue: moving, concurrencyKey: "other" });
    load.acknowledged.add(c.id);
    await eventually("a task of another key to run on the new owner", async () => (ran.has(c.id) ? true : undefined), 20_000);
    expect(started.has(b.id)).toBe(false);
    expect((await producer.getTask(b.id)).state).toBe("pending");
    // A settles through n2 (its lease moved with the rows); only then may B start.
    longTask.resolve();
    await eventually("the second task of the key to run after the first settled", async () => (finished.has(b.id) ? true : undefined), 20_000);
    mark('b ran');
    expect(started.get(b.id)!).toBeGreaterThanOrEqual(finished.get(a.id)!);
    expect((await producer.getTask(a.id)).state).toBe("completed");

    // Drain n2 through the CLI: every partition it holds (but the pinned one's pin is void now) goes to n1 and n3.
    const drainStarted = Date.now();
    const drainOut = await ok(n1!, "cluster", "drain", "n2");
    mark('drained');
    const drainMs = Date.now() - drainStarted;
    expect(drainOut).toMatch(/^drained n2: it holds no partition \(\d+\.\d s\)/m);
    const drained = await statusOf(n3!);
    expect(held(drained, "n2")).toBe(0);
    expect(drained.drainedNodes).toEqual(["n2"]);
    expect(drained.members.find((m) => m.nodeId === "n2")).toMatchObject({ drained: true, state: 2 });
    expect(drained.partitionOwners).not.toContain("n2");
    expect(drained.partitionStates[p]!.owner).not.toBe("n2");
    expect(await ok(n1!, "cluster", "status")).toMatch(/n2\s+active \(drained\)/);
    // Still a member serving calls: it forwards them to the owners.
    const viaN2 = fixture.client(n2!);
    const forwarded = await viaN2.enqueue(newTask("job", json({})), { queue: moving, concurrencyKey: "k0" });
    load.acknowledged.add(forwarded.id);

    const countAtDrain = load.acknowledged.size;
    await eventually("work to continue after the drain", async () => (load.acknowledged.size >= countAtDrain + 50 ? true : undefined), 30_000);
    // Undo: the ring gives n2 partitions again, and the pin of p (to n2) applies again.
    expect(await ok(n1!, "cluster", "drain", "n2", "--undo")).toMatch(/^undrained n2/);
    await eventually("n2 to hold partitions again, p among them", async () => {
      const s = await statusOf(n1!);
      return s.drainedNodes.length === 0 && held(s, "n2") > 0 && s.partitionStates[p]!.owner === "n2" ? true : undefined;
    }, 30_000);
    mark('undone');
    expect(await ok(n1!, "cluster", "move", String(p), "--unpin")).toMatch(new RegExp(`^unpinned partition ${p}`));
    await eventually("p back where the ring places it", async () => {
      const s = await statusOf(n2!);
      return s.partitionStates[p]!.pinnedTo === "" && s.partitionStates[p]!.owner === "n1" ? true : undefined;
    }, 30_000);

    mark('unpinned');
    await load.stop();
    await eventually("every acknowledged task to run", async () => ([...load.acknowledged].every((id) => ran.has(id)) ? true : undefined), 30_000);
    // A lease that lapses on an overloaded machine makes its node's partitions OWNER_DOWN for a moment: say so if it happened.
    const membershipTrouble = [n1!, n2!, n3!].flatMap((n) => n.logs.filter((l) => /fenced itself|keep-alive failed|registration failed/.test(l)));
    expect(load.failures, `membership trouble seen: ${membershipTrouble.join("\n") || "none"}; phases (ms since load began): ${JSON.stringify(marks)}`).toEqual([]);
    expect([...ran.values()].filter((n) => n > 1)).toEqual([]);
    expect(maxPerKey).toBe(1);
    const causes = [n1!, n2!, n3!].flatMap((n) => n.logs.map((l) => JSON.parse(l) as { msg?: string; cause?: string }).filter((l) => l.msg === "partition handed off").map((l) => l.cause));
    expect(causes).toContain("move");
    expect(causes).toContain("drain");
    console.log(`drain/move via the CLI: move of partition ${p} took ${moveMs} ms, drain of n2 took ${drainMs} ms (CLI round trip); ` +
      `${load.acknowledged.size} tasks acknowledged, all ran once, 0 failed calls, per-key max 1`);
  });

  it("bad input through the CLI is refused, naming what is wrong, and changes nothing; a drain outlives a restart; a single node is not a cluster", async () => {
    const ids = ["n1", "n2"];
    const { byId, cluster } = await startCluster(fixture.etcd, ids, nodes, 3, closers);
    const [n1, n2] = ids.map((id) => byId.get(id)!);
    // A first call claims a partition on each node, so there are holders to compare.
    const client = fixture.client(n1!);
    for (const q of [...queuesOn(ids, 1).values()].flat()) await client.enqueue(newTask("t", json({})), { queue: q });
    const before = placementOf(await statusOf(n1!));

    const refusals: Array<[string[], number, Record<string, unknown>, RegExp]> = [
      [["cluster", "drain", "nosuchnode"], 3, { code: "NOT_FOUND", reason: "NODE_NOT_FOUND", field: "node_id" }, /"nosuchnode"/],
      [["cluster", "move", "64", "--to", "n2"], 2, { code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "partition" }, /0 to 63, got 64/],
      [["cluster", "move", "3", "--to", "nosuchnode"], 3, { code: "NOT_FOUND", reason: "NODE_NOT_FOUND" }, /"nosuchnode"/],
      [["cluster", "move", "3"], 2, { code: "INVALID_ARGUMENT", field: "to_node_id" }, /required/],
      [["cluster", "move", "3", "--to", "n2", "--unpin"], 2, { code: "INVALID_ARGUMENT", field: "to_node_id" }, /must be empty with unpin/],
    ];
    // Independent and read-only: run together (each CLI start costs a second or more on a loaded machine).
    const runs = await Promise.all(refusals.map(([args]) => conveyor(n1!, "--json", ...args)));
    for (const [i, [args, code, fields, message]] of refusals.entries()) {
      const run = runs[i]!;
      expect(run.code, `conveyor ${args.join(" ")}: ${run.stderr}`).toBe(code);
      const printed = JSON.parse(run.stderr) as Record<string, unknown>;
      expect(printed).toMatchObject(fields);
      expect(printed.message).toMatch(message);
      expect(run.stdout).toBe("");
    }
    // Plain output names the node too.
    expect((await conveyor(n1!, "cluster", "drain", "nosuchnode")).stderr).toMatch(/^error: no cluster member is node "nosuchnode"/);
    expect(placementOf(await statusOf(n2!))).toEqual(before);

    // Drain n1; then draining n2 too, or moving a partition to drained n1, is refused.
    expect(await ok(n2!, "cluster", "drain", "n1")).toMatch(/^drained n1/);
    const last = await conveyor(n2!, "--json", "cluster", "drain", "n2");
    expect(last.code).toBe(5);
    expect(JSON.parse(last.stderr)).toMatchObject({ code: "FAILED_PRECONDITION", reason: "PLACEMENT_REFUSED", message: expect.stringMatching(/last active member/) });
    const toDrained = await conveyor(n2!, "--json", "cluster", "move", "3", "--to", "n1");
    expect(toDrained.code).toBe(5);
    expect(JSON.parse(toDrained.stderr)).toMatchObject({ reason: "PLACEMENT_REFUSED", message: expect.stringMatching(/n1 is drained/) });
    const drainedView = placementOf(await statusOf(n2!));
    expect(drainedView.drained).toEqual(["n1"]);
    expect(drainedView.pins).toEqual([]);

    // Restarted on its data directory, n1 is still drained (the mark is in etcd) and takes nothing back.
    expect(await n1!.stop()).toBe(0);
    const again = await NodeProcess.start({
      settings: { cluster_etcd: fixture.etcd.endpoints, cluster_name: cluster, node_id: "n1", cluster_member_ttl: "3s" }, dataDir: n1!.dataDir,
    });
    nodes.push(again);
    await eventually("n1 back as an active member", async () => {
      const s = await statusOf(again);
      return s.members.find((m) => m.nodeId === "n1" && m.self)?.state === 2 ? true : undefined;
    }, 20_000);
    const restarted = await statusOf(again);
    expect(restarted.drainedNodes).toEqual(["n1"]);
    expect(held(restarted, "n1")).toBe(0);
    expect(await ok(again, "cluster", "drain", "n1", "--undo")).toMatch(/^undrained n1/);
    await eventually("n1 to take its share back after the undo", async () => (held(await statusOf(n2!), "n1") > 0 ? true : undefined), 20_000);

    // A single node has no ring: drain and move answer "not a cluster" (after checking the request's own fields).
    const solo = await NodeProcess.start();
    nodes.push(solo);
    const notCluster = await conveyor(solo, "--json", "cluster", "drain", "n1");
    expect(notCluster.code).toBe(5);
    expect(JSON.parse(notCluster.stderr)).toMatchObject({ code: "FAILED_PRECONDITION", reason: "NOT_A_CLUSTER", message: expect.stringMatching(/^not a cluster/) });
    const soloBad = await conveyor(solo, "--json", "cluster", "move", "64", "--to", "x");
    expect(soloBad.code).toBe(2);
    expect(JSON.parse(soloBad.stderr)).toMatchObject({ field: "partition" });
  });
});
