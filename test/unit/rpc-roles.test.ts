/**
 * The RPC table is THE list: every RPC of every service generated from the proto has an
 * entry, no entry names an RPC that does not exist, and each row's `queues` column reads
 * every queue field of its request (walked from the descriptors, so a queue field added
 * to a request later fails here until its row reads it).
 */
import { create, type DescMessage } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { isAdminOnly, queueAccessOf, RPC_TABLE, rolesFor } from "../../src/server/security/roles.js";
import { allMethods } from "../fuzz/fuzz-requests.js";

const OUTSIDE = "zz-outside";

/** Whether a message (or one nested in it) has a string field named `queue`. */
function namesAQueue(desc: DescMessage, depth = 0): boolean {
  if (depth > 4) return false;
  return desc.fields.some((f) =>
    (f.fieldKind === "scalar" && f.name === "queue") ||
    (f.fieldKind === "message" && namesAQueue(f.message, depth + 1)) ||
    (f.fieldKind === "list" && f.listKind === "message" && namesAQueue(f.message, depth + 1)));
}

/** Init for a request with every `queue` field (nested ones, one element of each list) set to `queue`, and `id` to a task id. */
function filled(desc: DescMessage, queue: string, depth = 0): Record<string, unknown> {
  const init: Record<string, unknown> = {};
  if (depth > 4) return init;
  for (const f of desc.fields) {
    if (f.oneof) continue;
    if (f.fieldKind === "scalar" && f.name === "queue") init[f.localName] = queue;
    else if (f.fieldKind === "scalar" && f.name === "id" && depth === 0) init[f.localName] = "task-1";
    else if (f.fieldKind === "message") init[f.localName] = filled(f.message, queue, depth + 1);
    else if (f.fieldKind === "list" && f.listKind === "message") init[f.localName] = [filled(f.message, queue, depth + 1)];
  }
  return init;
}

describe("RPC table", () => {
  it("has exactly one entry per RPC of every service in the descriptors", async () => {
    const rpcs = (await allMethods()).map((m) => `${m.service}/${m.name}`).sort();
    expect(rpcs.length).toBeGreaterThan(30); // the walk saw the services
    expect(Object.keys(RPC_TABLE).sort()).toEqual(rpcs);
  });

  it("admin may call everything but node-to-node calls; only a node may call ClusterService; reads are open to reader, writes are not", () => {
    for (const rpc of Object.keys(RPC_TABLE)) {
      if (rpc.startsWith("ClusterService/")) expect(rolesFor(rpc)).toEqual(["node"]);
      else expect(rolesFor(rpc)).toContain("admin");
      if (!rpc.startsWith("ClusterService/")) expect(rolesFor(rpc)).not.toContain("node");
    }
    expect(isAdminOnly("ClusterService/AcceptPartition")).toBe(false);
    expect(rolesFor("AdminService/ListTasks")).toContain("reader");
    expect(rolesFor("AdminService/PauseQueue")).toEqual(["admin"]);
    expect(isAdminOnly("AdminService/PauseQueue")).toBe(true);
    expect(isAdminOnly("TaskService/Enqueue")).toBe(false);
    expect(rolesFor("AdminService/NoSuchRpc")).toBeUndefined();
    expect(queueAccessOf("AdminService/NoSuchRpc")).toBeUndefined();
  });

  it("each row's queues column reads every queue field of the request; the rest address a task, every queue, or none", async () => {
    const seen = new Set<string>();
    for (const m of await allMethods()) {
      const rpc = `${m.service}/${m.name}`;
      const access = queueAccessOf(rpc)!;
      const touch = access.touches(create(m.input, filled(m.input, OUTSIDE) as never));
      seen.add(access.kind);
      if (namesAQueue(m.input)) {
        expect(touch, `${rpc} names a queue: its row must read it`).toEqual({ kind: "queues", queues: expect.arrayContaining([OUTSIDE]) });
        expect(touch.kind === "queues" && touch.queues.every((q) => q === OUTSIDE), rpc).toBe(true);
        // An optional filter left empty is a request about every queue.
        if (access.kind === "namedOrEvery") expect(access.touches(create(m.input, filled(m.input, "") as never)), rpc).toEqual({ kind: "every" });
      } else if (m.input.fields.some((f) => f.name === "id")) {
        expect(touch, `${rpc} addresses a task by id`).toEqual({ kind: "task", id: "task-1" });
      } else {
        expect(["every", "none"], `${rpc} names no queue and no task`).toContain(touch.kind);
      }
      expect(access.fields, rpc).not.toBe("");
    }
    expect([...seen].sort()).toEqual(["byTaskId", "everyQueue", "named", "namedOrEvery", "nodeWide"]);
  });

  it("an empty queue in a task spec or a schedule command is the default queue, as the handlers read it", () => {
    expect(queueAccessOf("TaskService/Enqueue")!.touches({ task: { queue: "" } })).toEqual({ kind: "queues", queues: ["default"] });
    expect(queueAccessOf("TaskService/EnqueueBatch")!.touches({ tasks: [{ queue: "" }, { queue: "b" }] })).toEqual({ kind: "queues", queues: ["default", "b"] });
    expect(queueAccessOf("AdminService/PauseSchedule")!.touches({ queue: "", name: "s" })).toEqual({ kind: "queues", queues: ["default"] });
    // Where an empty queue is invalid it stays empty: no scope holds it, so a scoped caller is refused, never let through.
    expect(queueAccessOf("AdminService/PauseQueue")!.touches({ queue: "" })).toEqual({ kind: "queues", queues: [""] });
  });

  it("answers about every queue are cut to the scope where the table says how", () => {
    const allows = (q: string) => q.startsWith("billing-");
    const narrow = (rpc: string, response: unknown) => queueAccessOf(rpc)!.narrow!(response, allows);
    expect(narrow("AdminService/ListQueues", { queues: [{ name: "billing-a" }, { name: "emails" }] })).toEqual({ queues: [{ name: "billing-a" }] });
    expect(narrow("AdminService/ListWorkers", {
      workers: [{ workerId: "w1", queues: ["billing-a", "emails"] }, { workerId: "w2", queues: ["emails"] }],
    })).toEqual({ workers: [{ workerId: "w1", queues: ["billing-a"] }] });
    expect(narrow("AdminService/GetClusterInfo", { activeQueues: ["billing-a", "emails"], activeGrains: 2 })).toEqual({ activeQueues: ["billing-a"], activeGrains: 1 });
    // Summed over every queue: no way to cut it, so a scoped caller must name a queue.
    expect(queueAccessOf("AdminService/GetActivity")!.narrow).toBeUndefined();
    expect(queueAccessOf("AdminService/SetStrategies")!.narrow).toBeUndefined();
  });
});
