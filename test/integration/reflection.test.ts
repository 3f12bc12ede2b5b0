/**
 * gRPC server reflection: `buf curl` lists and calls a real node's services with no
 * proto files, over both reflection protocols (grpc.reflection.v1 and v1alpha).
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";
import { connect } from "../support/sdk.js";

const execFileAsync = promisify(execFile);
const BUF = join(REPO_ROOT, "node_modules/.bin/buf");

describe("gRPC server reflection", () => {
  let node: NodeProcess;
  let sdk: ReturnType<typeof connect>;
  // Run from an empty folder: no proto files, no buf.yaml to fall back on.
  const bufCurl = async (...args: string[]) =>
    (await execFileAsync(BUF, ["curl", "--protocol", "grpc", ...args], { cwd: "/" })).stdout;

  beforeAll(async () => {
    node = await NodeProcess.start();
    sdk = connect(node);
  });
  afterAll(async () => {
    await sdk?.close();
    await node?.stop();
    node?.cleanup();
  });

  it("lists the services and their methods, over reflection v1 and v1alpha", async () => {
    const services = ["conveyor.v1.AdminService", "conveyor.v1.TaskService", "conveyor.v1.WorkerService"];
    for (const protocol of ["grpc-v1", "grpc-v1alpha"]) {
      const listed = await bufCurl("--reflect-protocol", protocol, "--list-services", `http://${node.grpcAddress}`);
      expect(listed.trim().split("\n").sort()).toEqual(services);
    }
    const methods = (await bufCurl("--list-methods", `http://${node.grpcAddress}`)).trim().split("\n");
    expect(methods).toEqual(expect.arrayContaining([
      "conveyor.v1.TaskService/Enqueue", "conveyor.v1.AdminService/ListQueues", "conveyor.v1.WorkerService/Lease",
    ]));
  });

  it("calls RPCs with JSON built from the reflected schema", async () => {
    const payload = Buffer.from(JSON.stringify({ to: "ada@example.com" })).toString("base64");
    const enqueued = JSON.parse(await bufCurl("-d", JSON.stringify({
      task: { queue: "reflected", type: "email:send", payload, contentType: "application/json", priority: 7, metadata: { via: "buf" } },
    }), `http://${node.grpcAddress}/conveyor.v1.TaskService/Enqueue`)) as { result: { id: string; state: string } };
    expect(enqueued.result.state).toBe("TASK_STATE_PENDING");

    const task = await sdk.client.getTask(enqueued.result.id);
    expect(task).toMatchObject({ queue: "reflected", type: "email:send", priority: 7, metadata: { via: "buf" } });
    expect(task.json()).toEqual({ to: "ada@example.com" });

    const queues = JSON.parse(await bufCurl("-d", "{}", `http://${node.grpcAddress}/conveyor.v1.AdminService/ListQueues`)) as {
      queues: Array<{ name: string; counts: Record<string, string> }>;
    };
    expect(queues.queues.find((q) => q.name === "reflected")?.counts).toEqual({ pending: "1" });
  });
});
