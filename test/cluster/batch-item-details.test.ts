/**
 * A batch item's error carries what a single call's error carries (issue 34, item 5):
 * code, reason, field and the machine-readable details. Two nodes on etcd, no changelog;
 * n2 is killed, so its queue answers OWNER_DOWN (details: owner, partition) until it
 * returns. An EnqueueBatch through n1 naming a queue of each node stores n1's item and
 * fails n2's with the same error, details included, as a single Enqueue gets.
 */
import { describe, expect, it } from "vitest";
import { Client, ConveyorError, json, newTask } from "../../src/index.js";
import { clusterFixture, queuesOn, startCluster } from "../support/cluster.js";
import { eventually } from "../support/node-process.js";

const fixture = clusterFixture();
const { nodes, closers } = fixture;

const facts = (e: ConveyorError) => ({ code: e.code, reason: e.reason, field: e.field, details: e.details });

describe("batch item errors (real processes: etcd, two nodes)", { timeout: 120_000 }, () => {
  it("an EnqueueBatch item refused OWNER_DOWN names the owner and partition, as a single Enqueue does", async () => {
    const ids = ["n1", "n2"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, 3, closers);
    const placed = queuesOn(ids, 1);
    const [onN1, onN2] = [placed.get("n1")![0]!, placed.get("n2")![0]!];
    const client = new Client({ address: byId.get("n1")!.grpcAddress, coalesceEnqueues: false });
    closers.push(() => client.close());
    await client.enqueue(newTask("t", json({})), { queue: onN2 }); // n2 claims its partition
    await byId.get("n2")!.kill();

    const single = await eventually("n2's queue to answer OWNER_DOWN", async () => {
      try {
        await client.enqueue(newTask("t", json({})), { queue: onN2 });
        return undefined;
      } catch (e) {
        return e instanceof ConveyorError && e.reason === "OWNER_DOWN" ? e : undefined;
      }
    }, 30_000);
    expect(single.details).toMatchObject({ owner: "n2" });

    const [stored, refused] = await client.enqueueBatch([
      { task: newTask("t", json({})), options: { queue: onN1 } },
      { task: newTask("t", json({})), options: { queue: onN2 } },
    ]);
    expect(stored).not.toBeInstanceOf(ConveyorError);
    expect(refused).toBeInstanceOf(ConveyorError);
    expect(facts(refused as ConveyorError)).toEqual(facts(single));
  });
});
