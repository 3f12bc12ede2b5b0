/**
 * The RPC→role table is THE list: every RPC of every service generated from the proto has
 * an entry, and no entry names an RPC that does not exist.
 */
import { describe, expect, it } from "vitest";
import { isAdminOnly, RPC_ROLES, rolesFor } from "../../src/server/security/roles.js";
import { allMethods } from "../fuzz/fuzz-requests.js";

describe("RPC→role table", () => {
  it("has exactly one entry per RPC of every service in the descriptors", async () => {
    const rpcs = (await allMethods()).map((m) => `${m.service}/${m.name}`).sort();
    expect(rpcs.length).toBeGreaterThan(30); // the walk saw the services
    expect(Object.keys(RPC_ROLES).sort()).toEqual(rpcs);
  });

  it("admin may call everything; reads are open to reader, writes are not", () => {
    for (const rpc of Object.keys(RPC_ROLES)) expect(rolesFor(rpc)).toContain("admin");
    expect(rolesFor("AdminService/ListTasks")).toContain("reader");
    expect(rolesFor("AdminService/PauseQueue")).toEqual(["admin"]);
    expect(isAdminOnly("AdminService/PauseQueue")).toBe(true);
    expect(isAdminOnly("TaskService/Enqueue")).toBe(false);
    expect(rolesFor("AdminService/NoSuchRpc")).toBeUndefined();
  });
});
