/**
 * Admin audit lines name what was done, not a task's contents (issue 34, item 6): the
 * audit line of SetSchedule used to carry the schedule's payload (base64) and metadata in
 * clear. Now only their sizes. Through a real node with an auth file, the CLI's SDK path.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { ScheduleSchema } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskSpecSchema } from "../../src/gen/conveyor/v1/task_pb.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { eventually, NodeProcess } from "../support/node-process.js";
import { authFileWithRoles } from "../support/security.js";

let node: NodeProcess;
let channel: RpcChannel;
let token: string;

beforeAll(async () => {
  const auth = authFileWithRoles();
  token = auth.tokens.admin;
  node = await NodeProcess.start({ settings: { auth_file: auth.file } });
  channel = new RpcChannel({ address: node.grpcAddress, token });
});

afterAll(async () => {
  channel?.close();
  await node?.stop();
  node?.cleanup();
});

it("the audit line of SetSchedule carries the payload's and metadata's sizes, not their contents", async () => {
  const secret = "hunter2-very-secret-payload";
  const payload = new TextEncoder().encode(JSON.stringify({ password: secret }));
  await channel.service(AdminService).setSchedule({
    schedule: create(ScheduleSchema, {
      name: "nightly", cadence: { case: "intervalMs", value: 60_000n },
      task: create(TaskSpecSchema, { type: "tick", queue: "audit-q", payload, contentType: "application/json", metadata: { apiKey: "meta-secret-value" } }),
    }),
  });
  const line = await eventually("the SetSchedule audit line", async () =>
    node.logs.find((l) => l.includes('"audit":true') && l.includes("SetSchedule")), 10_000);
  expect(line).toContain(`(${payload.length} bytes)`);
  expect(line).toContain("(1 entries)");
  expect(line).toContain("nightly");
  expect(line).not.toContain(Buffer.from(payload).toString("base64"));
  expect(line).not.toContain("meta-secret-value");
  expect(line).not.toContain("apiKey");
});
