/**
 * WRONG_OWNER names the owner and the ring version as structured details (ErrorInfo
 * metadata), not only in its text, and they survive the wire: an in-process gRPC server
 * answers with the router's error and the SDK client rebuilds it with its details.
 */
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError, invalidField } from "../../src/base/errors.js";
import { Ring } from "../support/ring.js";
import { Router } from "../../src/cluster/router.js";
import type { Ownership } from "../../src/cluster/ownership.js";
import { TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { addUnaryService } from "../../src/rpc/server.js";
import type { UnaryImpl } from "../../src/rpc/service-definition.js";
import { Client } from "../../src/sdk/client.js";

const ring = new Ring(["node-a", "node-b"], 7);
/** A queue the ring places on node-b (found by scanning: placement is deterministic). */
const remoteQueue = Array.from({ length: 100 }, (_, i) => `q${i}`).find((q) => ring.ownerOf(q) === "node-b")!;
/** node-a's view: every partition the ring gives node-b is held there. */
const ownership: Ownership = {
  nodeId: "node-a", partitions: ring.partitions, ringVersion: 7,
  partitionOf: (q) => ring.partitionOf(q),
  route: (p) => (ring.ownerOfPartition(p) === "node-a" ? { kind: "local", p, epoch: 1 } : { kind: "remote", p, nodeId: "node-b", address: "b:1", epoch: 1 }),
  acquire: async () => undefined,
  holds: (p) => ring.ownerOfPartition(p) === "node-a",
  refresh: async () => {},
  members: () => ["node-a", "node-b"],
  whenMoved: async () => true,
};
const router = new Router({
  ownership,
  localRef: () => { throw new Error("not local"); }, localGrain: () => { throw new Error("not local"); },
  queueOfTask: (id) => (id === "remote-task" ? remoteQueue : undefined),
});

const caught = (fn: () => unknown): ConveyorError => {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConveyorError) return error;
    throw error;
  }
  throw new Error("expected a throw");
};

describe("WRONG_OWNER", () => {
  it("carries the owner and the ring version as details", () => {
    const error = caught(() => router.grainFor(remoteQueue));
    expect(error).toMatchObject({ code: "UNAVAILABLE", reason: "WRONG_OWNER", details: { owner: "node-b", ringVersion: "7" } });
    expect(error.message).toContain("node-b");
    // A task of a partition held elsewhere is not this node's to find (the forwarder asks its owner).
    expect(caught(() => router.grainForTask("remote-task")).reason).toBe("TASK_NOT_FOUND");
    expect(caught(() => router.localGrainFor(remoteQueue)).details).toEqual({ owner: "node-b", ringVersion: "7" });
  });

  describe("over gRPC to the SDK", () => {
    let server: grpc.Server;
    let client: Client;

    beforeAll(async () => {
      server = new grpc.Server();
      const impl = {
        getTask: async (call: { request: { id: string } }) => {
          if (call.request.id === "bad") throw invalidField("id", "is bad");
          if (call.request.id === "remote-task") router.grainFor(remoteQueue);
          return {};
        },
      } as unknown as UnaryImpl<typeof TaskService>;
      addUnaryService(server, TaskService, impl, () => {});
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
      client = new Client({ address: `127.0.0.1:${port}` });
    });

    afterAll(() => {
      client.close();
      server.forceShutdown();
    });

    it("keeps the details, and keeps them apart from the field", async () => {
      const error = await client.getTask("remote-task").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConveyorError);
      expect(error).toMatchObject({ code: "UNAVAILABLE", reason: "WRONG_OWNER", details: { owner: "node-b", ringVersion: "7" } });
      expect((error as ConveyorError).field).toBeUndefined();

      const bad = await client.getTask("bad").catch((e: unknown) => e);
      expect(bad).toMatchObject({ reason: "INVALID_FIELD", field: "id" });
      expect((bad as ConveyorError).details).toBeUndefined();
    });
  });
});
