/**
 * ClusterService/AcceptPartition, the receiving side of a handoff, against callers that
 * are not handing anything over (issue 34, item 6): before, a single node served it and
 * any node buffered unfinished transfers without a cap (100 chunks of 4 MiB with
 * `last: false` took RSS 106 → 530 MB). Now a node alone does not serve ClusterService,
 * a transfer's first chunk is refused unless etcd records the partition as held by the
 * sender (and not by this node), and an unfinished transfer holds at most
 * HANDOFF_TRANSFER_MAX_BYTES. Through real gRPC to real nodes on a real etcd.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { ConveyorError } from "../../src/base/errors.js";
import { REQUEST_MAX_BYTES } from "../../src/base/limits.js";
import { ClusterService } from "../../src/gen/conveyor/v1/cluster_service_pb.js";
import { Client, json, newTask } from "../../src/index.js";
import { fromServiceError } from "../../src/rpc/status.js";
import { toGrpcDefinition } from "../../src/rpc/service-definition.js";
import { HANDOFF_TRANSFER_MAX_BYTES } from "../../src/server/handoff/cluster-service.js";
import { clusterFixture, queuesOn, startCluster, statusOf } from "../support/cluster.js";
import { eventually, NodeProcess } from "../support/node-process.js";
import { Ring } from "../support/ring.js";

const fixture = clusterFixture();
const { nodes, closers } = fixture;

const accept = toGrpcDefinition(ClusterService).acceptPartition!;

/** One AcceptPartition call as a peer would make it (no auth on these nodes). */
function acceptPartition(node: NodeProcess, request: Record<string, unknown>): Promise<unknown> {
  const c = new grpc.Client(node.grpcAddress, grpc.credentials.createInsecure());
  closers.push(() => c.close());
  return new Promise((resolve, reject) => c.makeUnaryRequest(accept.path, accept.requestSerialize, accept.responseDeserialize, request, new grpc.Metadata(),
    { deadline: Date.now() + 20_000 }, (err, res) => (err ? reject(err) : resolve(res))));
}

async function refusal(call: Promise<unknown>): Promise<grpc.ServiceError> {
  const error = await call.then(() => undefined, (e: unknown) => e);
  expect(error, "the call is refused").toBeDefined();
  return error as grpc.ServiceError;
}

const rssMb = (node: NodeProcess) => {
  const status = readFileSync(`/proc/${node.child.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
};

describe("AcceptPartition", () => {
  it("is not served by a node alone: UNIMPLEMENTED", async () => {
    const node = await NodeProcess.start();
    nodes.push(node);
    const error = await refusal(acceptPartition(node, { partition: 0, fromNode: "n9", epoch: 1n, transferId: randomUUID(), chunk: 0, last: false, data: new Uint8Array(1024) }));
    expect(error.code).toBe(grpc.status.UNIMPLEMENTED);
  });

  it("refuses a first chunk that is not coming here, and drops a transfer past its cap", async () => {
    const ids = ["n1", "n2"];
    const { byId } = await startCluster(fixture.etcd, ids, nodes, 5, closers);
    const [n1, n2] = [byId.get("n1")!, byId.get("n2")!];
    // A queue the ring gives n1, used once so that n1 claims its partition.
    const queue = queuesOn(ids, 1).get("n1")![0]!;
    const client = new Client({ address: n1.grpcAddress });
    closers.push(() => client.close());
    await client.enqueue(newTask("job", json({})), { queue });
    const status = await statusOf(n1, closers);
    const p = new Ring(["x"], 1, status.partitions).partitionOf(queue);
    await eventually(`n2 to see partition ${p} held by n1`, async () => {
      const s = (await statusOf(n2, closers)).partitionStates[p]!;
      return s.state === "owned" && s.owner === "n1" ? true : undefined;
    }, 10_000);
    const chunk = (fromNode: string, transferId: string, i: number, data: Uint8Array) =>
      ({ partition: p, fromNode, epoch: 1n, transferId, chunk: i, last: false, data });
    const small = new Uint8Array(1024);

    // From a node that does not hold it: refused on the first chunk, naming the holder.
    const stranger = fromServiceError(await refusal(acceptPartition(n2, chunk("n9", randomUUID(), 0, small))));
    expect(stranger).toBeInstanceOf(ConveyorError);
    expect([stranger.code, stranger.reason]).toEqual(["FAILED_PRECONDITION", "PLACEMENT_REFUSED"]);
    expect(stranger.message).toContain(`partition ${p} is not coming to this node from "n9"`);
    expect(stranger.message).toContain(`held by "n1"`);
    // To the node that holds it: refused on the first chunk, not only at the last.
    const toHolder = fromServiceError(await refusal(acceptPartition(n1, chunk("n2", randomUUID(), 0, small))));
    expect([toHolder.code, toHolder.reason]).toEqual(["FAILED_PRECONDITION", "PLACEMENT_REFUSED"]);
    expect(toHolder.message).toContain("is held by this node");

    // From its holder, never finished: buffered up to the cap, then dropped.
    const data = new Uint8Array(REQUEST_MAX_BYTES - 4096);
    const fits = Math.floor(HANDOFF_TRANSFER_MAX_BYTES / data.byteLength);
    const transferId = randomUUID();
    const rssBefore = rssMb(n2);
    let rssPeak = rssBefore;
    for (let i = 0; i < fits; i++) {
      await acceptPartition(n2, chunk("n1", transferId, i, data));
      rssPeak = Math.max(rssPeak, rssMb(n2));
    }
    const over = fromServiceError(await refusal(acceptPartition(n2, chunk("n1", transferId, fits, data))));
    expect([over.code, over.field]).toEqual(["RESOURCE_EXHAUSTED", "data"]);
    expect(over.message).toContain(`more than ${HANDOFF_TRANSFER_MAX_BYTES} bytes for one transfer`);
    // The transfer is gone: its next chunk has nothing to follow.
    const after = fromServiceError(await refusal(acceptPartition(n2, chunk("n1", transferId, fits + 1, small))));
    expect(after.message).toContain("before chunk 0");
    console.log(`AcceptPartition: ${fits} chunks of ${data.byteLength} bytes taken, chunk ${fits} refused; n2 RSS ${rssBefore.toFixed(0)} → peak ${rssPeak.toFixed(0)} MB`);
    // n2 still serves, and n1 still holds the partition (nothing was loaded or claimed).
    expect((await statusOf(n2, closers)).partitionStates[p]!.owner).toBe("n1");
  });
});
