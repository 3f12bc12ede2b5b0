/**
 * Member keep-alives against a real three-member etcd losing a member (issue 13, test 8's
 * gap): a keep-alive goes to every endpoint at once, so a dead follower costs nothing and
 * a dead leader costs only the election. Before, etcd3 sent each keep-alive to one
 * endpoint at random and opened circuit breakers on followers that were waiting for the
 * election, and a node could go 3/4 of its TTL without a renewal and fence itself.
 */
import { afterEach, describe, expect, it } from "vitest";
import { EtcdCoordination } from "../../src/cluster/etcd-coordination.js";
import { startEtcd, type EtcdCluster, type EtcdMember } from "../support/etcd.js";
import { eventually } from "../support/node-process.js";

const TTL_MS = 5_000;
/** What the membership shell gives each keep-alive: a quarter of the TTL. */
const KEEPALIVE_TIMEOUT_MS = TTL_MS / 4;

describe("member keep-alives on a three-member etcd", { timeout: 90_000 }, () => {
  let etcd: EtcdCluster | undefined;
  let coordination: EtcdCoordination | undefined;
  afterEach(async () => {
    await coordination?.close();
    await etcd?.stop();
    coordination = undefined;
    etcd = undefined;
  });

  async function setUp(): Promise<{ etcd: EtcdCluster; c: EtcdCoordination; lease: string; leader: EtcdMember }> {
    etcd = await startEtcd({ size: 3 });
    coordination = new EtcdCoordination({ endpoints: etcd.hosts, cluster: "keepalives" });
    const lease = await coordination.grantLease(TTL_MS);
    const leader = await eventually("etcd to name its leader", () => etcd!.leader(), 10_000);
    return { etcd, c: coordination, lease, leader };
  }

  it("with a follower killed, every keep-alive is answered at once", async () => {
    const { etcd, c, lease, leader } = await setUp();
    const follower = etcd.members.find((m) => m !== leader)!;
    await follower.kill();
    const answers: Array<{ result: string; ms: number }> = [];
    for (let i = 0; i < 20; i++) {
      const sentAt = performance.now();
      const result = await c.keepAlive(lease, KEEPALIVE_TIMEOUT_MS).catch((err: Error) => `failed: ${err.message}`);
      answers.push({ result, ms: performance.now() - sentAt });
    }
    expect(answers.filter((a) => a.result !== "alive")).toEqual([]);
    expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(KEEPALIVE_TIMEOUT_MS);
  });

  it("with the leader killed, the lease is renewed again as soon as a new leader exists, and never reported lost", async () => {
    const { etcd, c, lease, leader } = await setUp();
    const killedAt = performance.now();
    await leader.kill();
    // Keep-alives go every 100 ms (as a node's retries do) until ten in a row succeed after the election.
    let electedAtMs: number | undefined;
    const electing = eventually("a new etcd leader among the two members left", async () => {
      const l = await etcd.leader();
      return l && l !== leader ? l : undefined;
    }, 30_000).then(() => (electedAtMs = performance.now() - killedAt));
    const results: string[] = [];
    let firstAliveAtMs: number | undefined;
    let aliveInARow = 0;
    while (aliveInARow < 10 && performance.now() - killedAt < 30_000) {
      const result = await c.keepAlive(lease, KEEPALIVE_TIMEOUT_MS).catch(() => "failed");
      results.push(result);
      if (result === "alive") {
        firstAliveAtMs ??= performance.now() - killedAt;
        aliveInARow += electedAtMs === undefined ? 0 : 1;
      } else {
        aliveInARow = 0;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    await electing;
    console.log(`leader killed: new leader seen after ${Math.round(electedAtMs!)} ms, first renewal after ${Math.round(firstAliveAtMs!)} ms ` +
      `(${results.filter((r) => r !== "alive").length} keep-alives failed meanwhile)`);
    expect(results).not.toContain("lost");
    expect(aliveInARow).toBe(10);
    // Renewed no later than a keep-alive's timeout after the election was visible.
    expect(firstAliveAtMs!).toBeLessThan(electedAtMs! + KEEPALIVE_TIMEOUT_MS + 500);
  });
});
