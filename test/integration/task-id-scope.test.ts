/**
 * A client-chosen task id already used in a queue outside the caller's scope (issue 34,
 * item 6): the refusal must not name that queue. A producer scoped to `a-*` that enqueues
 * into `a-1` with the id of a task in `b-1` or `c-1` gets the same answer for both, over
 * Enqueue, EnqueueBatch (the item's error), EnqueueTx and the JSON API (409).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { NodeProcess } from "../support/node-process.js";
import { authFileWithRoles, jsonApi, taskSpecIn } from "../support/security.js";

let node: NodeProcess;
let admin: RpcChannel;
let scoped: RpcChannel;
let scopedToken: string;

beforeAll(async () => {
  const auth = authFileWithRoles({ scoped: ["a-*"] });
  scopedToken = auth.scopedTokens.producer;
  node = await NodeProcess.start({ settings: { auth_file: auth.file } });
  admin = new RpcChannel({ address: node.grpcAddress, token: auth.tokens.admin });
  scoped = new RpcChannel({ address: node.grpcAddress, token: scopedToken });
  await admin.service(TaskService).enqueue({ task: { ...taskSpecIn("b-1"), taskId: "taken-in-b" } });
  await admin.service(TaskService).enqueue({ task: { ...taskSpecIn("c-1"), taskId: "taken-in-c" } });
});

afterAll(async () => {
  admin?.close();
  scoped?.close();
  await node?.stop();
  node?.cleanup();
});

async function refusal(call: () => Promise<unknown>): Promise<ConveyorError> {
  try {
    await call();
  } catch (e) {
    if (e instanceof ConveyorError) return e;
    throw e;
  }
  throw new Error("expected a refusal");
}

/** Every way a scoped producer can try `id` in `a-1`, as `{ surface: "code reason field: message" }`. */
async function answersFor(id: string): Promise<Record<string, string>> {
  const tasks = scoped.service(TaskService);
  const spec = { ...taskSpecIn("a-1"), taskId: id };
  const text = (e: { code: string | number; reason: string; field: string; message: string }) => `${e.code} ${e.reason} ${e.field}: ${e.message}`;
  const single = await refusal(() => tasks.enqueue({ task: spec }));
  const batch = await tasks.enqueueBatch({ tasks: [spec] });
  const item = batch.items[0]!.outcome;
  const tx = await refusal(() => tasks.enqueueTx({ tasks: [spec] }));
  const http = await jsonApi(node.httpAddress, "TaskService/Enqueue", { task: { queue: "a-1", type: "t", taskId: id } }, scopedToken);
  const body = JSON.parse(http.body) as { code: string; reason: string; field?: string; message: string };
  return {
    enqueue: text({ code: single.code, reason: single.reason, field: single.field ?? "", message: single.message }),
    enqueueBatch: item.case === "error" ? text(item.value) : `not refused: ${JSON.stringify(item.value)}`,
    enqueueTx: text({ code: tx.code, reason: tx.reason, field: tx.field ?? "", message: tx.message }),
    json: `${http.status} ${text({ ...body, field: body.field ?? "" })}`,
  };
}

describe("a client-chosen task id used outside the caller's scope", () => {
  it("is refused without naming the queue that has it, the same whichever queue that is", async () => {
    const inB = await answersFor("taken-in-b");
    const inC = await answersFor("taken-in-c");
    console.log("answers to a scoped producer:", inB);
    for (const answer of Object.values(inB)) {
      expect(answer).toContain("TASK_ID_CONFLICT");
      expect(answer).not.toContain("b-1");
    }
    expect(inB.json).toMatch(/^409 /);
    // Nothing in the answer depends on where the id is used.
    expect(Object.values(inC).map((a) => a.replaceAll("taken-in-c", "ID"))).toEqual(Object.values(inB).map((a) => a.replaceAll("taken-in-b", "ID")));
    // And nothing was stored in a-1.
    const held = await admin.service(TaskService).getTask({ id: "taken-in-b" });
    expect(held.task?.queue).toBe("b-1");
  });
});
