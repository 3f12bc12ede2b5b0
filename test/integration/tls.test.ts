/**
 * TLS and mTLS end to end with certificates openssl makes for the test: the SDK client,
 * the worker and the CLI over TLS with a token, then with client certificates mapped to
 * identities; an untrusted certificate, a wrong host name and a missing client
 * certificate are refused in words; SIGHUP reloads the certificate.
 */
import { execFile } from "node:child_process";
import { copyFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, Mux, Worker, json, newTask } from "../../src/index.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { channelSecurity } from "../../src/sdk/connection-security.js";
import { eventually, NodeProcess, REPO_ROOT } from "../support/node-process.js";
import { makeCerts, type CertFiles } from "../support/certs.js";
import { authFileWithRoles, type RoleName } from "../support/security.js";

const execFileAsync = promisify(execFile);

async function cli(node: NodeProcess, args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = { ...process.env };
  delete base.CONVEYOR_TOKEN;
  try {
    const out = await execFileAsync(process.execPath, [join(REPO_ROOT, "bin/conveyor.js"), "--server", node.grpcAddress, "--timeout", "5s", ...args], { env: { ...base, ...env } });
    return { code: 0, ...out };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

/** POST to the JSON API over HTTPS, trusting `ca`, optionally with a client certificate. */
function httpsJson(node: NodeProcess, rpc: string, ca: Buffer, extra: { token?: string; cert?: Buffer; key?: Buffer } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1", port: node.httpPort, path: `/api/conveyor.v1.${rpc}`, method: "POST", ca,
      ...(extra.cert ? { cert: extra.cert, key: extra.key } : {}),
      headers: { "content-type": "application/json", ...(extra.token ? { authorization: `Bearer ${extra.token}` } : {}) },
    }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end("{}");
  });
}

async function runsATask(client: Client, worker: Omit<ConstructorParameters<typeof Worker>[0], "mux" | "queues">, queue: string): Promise<void> {
  let resolveDone!: (v: unknown) => void;
  const done = new Promise((r) => (resolveDone = r));
  const w = new Worker({ ...worker, queues: [queue], leaseWaitMs: 1_000, mux: new Mux().handle("t", async (task) => resolveDone(task.json())) }).start();
  try {
    await client.enqueue(newTask("t", json({ over: "tls" })), { queue });
    expect(await done).toEqual({ over: "tls" });
  } finally {
    await w.stop({ graceMs: 0 });
  }
}

describe("TLS with tokens", () => {
  let certs: CertFiles;
  let node: NodeProcess;
  let tokens: Record<RoleName, string>;
  let liveCert: string;
  let liveKey: string;

  beforeAll(async () => {
    certs = makeCerts();
    const auth = authFileWithRoles();
    tokens = auth.tokens;
    // The node reads these paths; the reload test swaps their contents.
    liveCert = join(certs.dir, "live.crt");
    liveKey = join(certs.dir, "live.key");
    copyFileSync(certs.serverCert, liveCert);
    copyFileSync(certs.serverKey, liveKey);
    node = await NodeProcess.start({ settings: { auth_file: auth.file, tls_cert: liveCert, tls_key: liveKey } });
  });

  afterAll(async () => {
    await node?.stop();
    node?.cleanup();
  });

  it("the SDK client and worker work over TLS with a token", async () => {
    const tls = { ca: certs.read(certs.caCert) };
    const client = new Client({ address: node.grpcAddress, token: tokens.producer, tls });
    try {
      await runsATask(client, { address: node.grpcAddress, token: tokens.worker, tls }, "tlsq");
    } finally {
      client.close();
    }
  });

  it("the CLI works over TLS with --ca, and the JSON API over HTTPS", async () => {
    const ok = await cli(node, ["--ca", certs.caCert, "queue", "ls"], { CONVEYOR_TOKEN: tokens.reader });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain("tlsq");
    const ca = certs.read(certs.caCert);
    expect((await httpsJson(node, "AdminService/ListQueues", ca, { token: tokens.reader })).status).toBe(200);
    expect((await httpsJson(node, "AdminService/ListQueues", ca)).status).toBe(401);
  });

  it("an untrusted certificate is refused with words, by the SDK and the CLI", async () => {
    // The SDK's Client waits for a connection (connectTimeoutMs), then names the handshake's failure.
    const client = new Client({ address: node.grpcAddress, token: tokens.producer, tls: { ca: certs.read(certs.otherCaCert) }, connectTimeoutMs: 1_000 });
    try {
      await expect(client.enqueue(newTask("t", json({})), { queue: "tlsq" })).rejects.toMatchObject({
        reason: "TLS_FAILED", message: expect.stringContaining("certificate not trusted"),
      });
    } finally {
      await client.close();
    }
    // The Worker waits for its node as long as it takes; its waiting line names the cause.
    const lines: string[] = [];
    let onNamed = () => {};
    const named = new Promise<void>((resolve) => (onNamed = resolve));
    const worker = new Worker({
      address: node.grpcAddress, token: tokens.worker, tls: { ca: certs.read(certs.otherCaCert) },
      mux: new Mux().handle("t", async () => {}), queues: ["tlsq"], handleSignals: false,
      logger: { info: () => {}, warn: (line) => { lines.push(line); if (line.includes("certificate not trusted")) onNamed(); } },
    });
    worker.start();
    try {
      await named;
    } finally {
      await worker.stop({ graceMs: 0 });
    }
    expect(lines.some((l) => l.startsWith(`waiting for the node at ${node.grpcAddress}`))).toBe(true);
    const channel = new RpcChannel({ address: node.grpcAddress, ...channelSecurity({ token: tokens.reader, tls: { ca: certs.read(certs.otherCaCert) } }) });
    try {
      await expect(channel.service(AdminService).listQueues({}, { timeoutMs: 5_000 })).rejects.toMatchObject({ reason: "TLS_FAILED", message: expect.stringContaining("certificate not trusted") });
    } finally {
      channel.close();
    }
    const res = await cli(node, ["--ca", certs.otherCaCert, "queue", "ls"], { CONVEYOR_TOKEN: tokens.reader });
    expect(res.code).toBe(4);
    expect(res.stderr).toContain("certificate not trusted");
    const missing = await cli(node, ["--ca", join(certs.dir, "nope.crt"), "queue", "ls"]);
    expect(missing.stderr).toContain("--ca");
    expect(missing.stderr).toContain("no such file");
  });

  it("SIGHUP reloads the certificate: one for another name is refused as a wrong host name, the right one works again", async () => {
    const named = certs.server("named", "DNS:conveyor.internal");
    // The node also reloads on its own when the files change: count SIGHUP's reloads only.
    const sighupReloads = () => node.logs.filter((l) => l.includes("TLS certificate reloaded") && l.includes('"SIGHUP"')).length;
    const reloaded = (n: number) => eventually("the TLS reload log line", async () => (sighupReloads() >= n ? true : undefined));
    copyFileSync(named.cert, liveCert);
    copyFileSync(named.key, liveKey);
    node.child.kill("SIGHUP");
    await reloaded(1);
    const channel = new RpcChannel({ address: node.grpcAddress, ...channelSecurity({ token: tokens.reader, tls: { ca: certs.read(certs.caCert) } }) });
    try {
      await expect(channel.service(AdminService).listQueues({}, { timeoutMs: 5_000 })).rejects.toMatchObject({ reason: "TLS_FAILED", message: expect.stringContaining("host name does not match") });
    } finally {
      channel.close();
    }
    // A broken pair is refused and the serving certificate stays.
    writeFileSync(liveKey, "not a key");
    node.child.kill("SIGHUP");
    await eventually("the failed reload log line", async () => (node.logs.some((l) => l.includes("TLS reload failed") && l.includes('"SIGHUP"')) ? true : undefined));
    copyFileSync(certs.serverCert, liveCert);
    copyFileSync(certs.serverKey, liveKey);
    node.child.kill("SIGHUP");
    await reloaded(2);
    const again = new RpcChannel({ address: node.grpcAddress, ...channelSecurity({ token: tokens.reader, tls: { ca: certs.read(certs.caCert) } }) });
    try {
      expect((await again.service(AdminService).listQueues({}, { timeoutMs: 5_000 })).queues.length).toBeGreaterThan(0);
    } finally {
      again.close();
    }
  });
});

describe("mTLS: client certificates as identities", () => {
  let certs: CertFiles;
  let node: NodeProcess;

  beforeAll(async () => {
    certs = makeCerts();
    const auth = join(certs.dir, "auth.yaml");
    writeFileSync(auth, [
      "certificates:",
      "  - { name: worker-fleet, common_name: worker-1, roles: [worker] }",
      "  - { name: ops-cert, common_name: ops, roles: [admin] }",
    ].join("\n") + "\n");
    node = await NodeProcess.start({ settings: { auth_file: auth, tls_cert: certs.serverCert, tls_key: certs.serverKey, tls_client_ca: certs.caCert } });
  });

  afterAll(async () => {
    await node?.stop();
    node?.cleanup();
  });

  const tlsFor = (cn: string, signer: "ca" | "other" = "ca") => {
    const c = certs.client(cn, signer);
    return { ca: certs.read(certs.caCert), cert: certs.read(c.cert), key: certs.read(c.key) };
  };

  it("a client certificate's CN is the identity: ops enqueues, worker-1 works", async () => {
    const client = new Client({ address: node.grpcAddress, tls: tlsFor("ops") });
    try {
      await runsATask(client, { address: node.grpcAddress, tls: tlsFor("worker-1") }, "mtlsq");
    } finally {
      client.close();
    }
  });

  it("refuses no client certificate, one from another CA (TLS), and an unknown CN (UNAUTHENTICATED)", async () => {
    const bare = new Client({ address: node.grpcAddress, tls: { ca: certs.read(certs.caCert) }, timeoutMs: 5_000 });
    const foreign = new Client({ address: node.grpcAddress, tls: tlsFor("ops", "other"), timeoutMs: 5_000 });
    const stranger = new Client({ address: node.grpcAddress, tls: tlsFor("stranger"), timeoutMs: 5_000 });
    const worker = new Client({ address: node.grpcAddress, tls: tlsFor("worker-1"), timeoutMs: 5_000 });
    try {
      for (const c of [bare, foreign]) {
        const e = await c.enqueue(newTask("t"), { queue: "mtlsq" }).catch((x: unknown) => x);
        expect(e).toMatchObject({ code: "UNAVAILABLE" });
        expect(String((e as Error).message)).not.toBe("");
      }
      await expect(stranger.enqueue(newTask("t"), { queue: "mtlsq" })).rejects.toMatchObject({ code: "UNAUTHENTICATED", message: expect.stringContaining('CN "stranger" is not in the node\'s auth file') });
      await expect(worker.enqueue(newTask("t"), { queue: "mtlsq" })).rejects.toMatchObject({ code: "PERMISSION_DENIED", message: expect.stringContaining("worker-fleet") });
    } finally {
      for (const c of [bare, foreign, stranger, worker]) c.close();
    }
  });

  it("the CLI with --cert/--key acts as the certificate's identity, audited by name; HTTPS takes client certificates too", async () => {
    const ops = certs.client("ops");
    const res = await cli(node, ["--ca", certs.caCert, "--cert", ops.cert, "--key", ops.key, "queue", "pause", "mtlsq"]);
    expect(res.code, res.stderr).toBe(0);
    // The node writes its audit line around its answer; it reaches this process's pipe on its own time.
    const audit = await eventually("the audit line of the pause", async () =>
      node.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.audit === true && l.rpc === "AdminService/PauseQueue"));
    expect(audit).toMatchObject({ identity: "ops-cert", via: "certificate", outcome: "OK" });
    const worker = certs.client("worker-1");
    const denied = await cli(node, ["--ca", certs.caCert, "--cert", worker.cert, "--key", worker.key, "queue", "resume", "mtlsq"]);
    expect(denied.code).toBe(6);
    expect(denied.stderr).toContain("worker-fleet (roles: worker) may not call AdminService/ResumeQueue");
    const ok = await httpsJson(node, "AdminService/ListQueues", certs.read(certs.caCert), { cert: certs.read(ops.cert), key: certs.read(ops.key) });
    expect(ok.status).toBe(200);
    await expect(httpsJson(node, "AdminService/ListQueues", certs.read(certs.caCert))).rejects.toThrow();
  });
});
