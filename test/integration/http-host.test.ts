/**
 * DNS rebinding: a page on rebind.example whose name resolves to 127.0.0.1 sends
 * `Host: rebind.example:<port>` with a matching Origin. The node serves only loopback
 * names and the names it was given, with auth off and on; /healthz answers any Host.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeProcess } from "../support/node-process.js";
import { authFileWithRoles, jsonApi, rawHttp } from "../support/security.js";

function rebinding(node: NodeProcess) {
  const host = `rebind.example:${node.httpPort}`;
  return { host, origin: `http://${host}` };
}

describe("Host allow-list", () => {
  let open: NodeProcess;
  let secured: NodeProcess;
  let adminToken: string;

  beforeAll(async () => {
    const auth = authFileWithRoles();
    adminToken = auth.tokens.admin;
    [open, secured] = await Promise.all([
      NodeProcess.start(),
      NodeProcess.start({ settings: { auth_file: auth.file, http_allowed_hosts: "conveyor.internal, ops.example.com" } }),
    ]);
  });

  afterAll(async () => {
    for (const n of [open, secured]) {
      await n?.stop();
      n?.cleanup();
    }
  });

  it("refuses the rebinding request with auth off (403), and nothing changes", async () => {
    const { host, origin } = rebinding(open);
    const pause = await jsonApi(open.httpAddress, "AdminService/PauseQueue", { queue: "victim" }, undefined, { host, origin });
    expect(pause.status).toBe(403);
    expect(JSON.parse(pause.body)).toMatchObject({ reason: "HOST_NOT_ALLOWED", message: expect.stringContaining("rebind.example") });
    for (const path of ["/", "/metrics", "/js/main.js"]) expect((await rawHttp(open.httpAddress, path, { headers: { host } })).status, path).toBe(403);
    const queues = await jsonApi(open.httpAddress, "AdminService/ListQueues", {});
    expect(queues.status).toBe(200);
    expect(JSON.parse(queues.body).queues ?? []).toEqual([]); // the refused pause made no queue
    // The same request through a loopback name is served (the check is the Host, not the path).
    for (const h of [`localhost:${open.httpPort}`, `127.0.0.1:${open.httpPort}`, `[::1]:${open.httpPort}`]) {
      expect((await jsonApi(open.httpAddress, "AdminService/ListQueues", {}, undefined, { host: h })).status, h).toBe(200);
    }
  });

  it("refuses it with auth on even with a valid admin token, and serves the configured names", async () => {
    const { host, origin } = rebinding(secured);
    expect((await jsonApi(secured.httpAddress, "AdminService/PauseQueue", { queue: "victim" }, adminToken, { host, origin })).status).toBe(403);
    expect((await jsonApi(secured.httpAddress, "AdminService/ListQueues", {}, adminToken, { host: `conveyor.internal:${secured.httpPort}` })).status).toBe(200);
    expect((await jsonApi(secured.httpAddress, "AdminService/ListQueues", {}, adminToken, { host: "OPS.example.com" })).status).toBe(200);
    expect((await jsonApi(secured.httpAddress, "AdminService/ListQueues", {}, adminToken)).status).toBe(200);
    const queues = JSON.parse((await jsonApi(secured.httpAddress, "AdminService/ListQueues", {}, adminToken)).body);
    expect(queues.queues ?? []).toEqual([]);
  });

  it("keeps the Origin check: a cross-origin request with an allowed Host is still refused", async () => {
    const res = await jsonApi(open.httpAddress, "AdminService/PauseQueue", { queue: "victim" }, undefined, { origin: "http://evil.example" });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body).reason).toBe("CROSS_ORIGIN");
  });

  it("answers /healthz whatever the Host", async () => {
    expect((await rawHttp(open.httpAddress, "/healthz", { headers: { host: "10.1.2.3:8080" } })).status).toBe(200);
  });
});
