/**
 * The node reloads its TLS files and its auth file when they change on disk, without
 * SIGHUP: a renewed certificate is what new connections get on both ports; a file caught
 * half written keeps the old certificate (with a warning) until the next change; a token
 * added to the auth file works from the next call, a removed one stops, and an auth file
 * that does not load keeps the tokens in force. Nothing here sleeps: each step polls what
 * a client can observe, bounded by a deadline.
 */
import { X509Certificate } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { channelSecurity } from "../../src/sdk/connection-security.js";
import { hashToken, newToken } from "../../src/server/security/tokens.js";
import { makeCerts, type CertFiles } from "../support/certs.js";
import { eventually, NodeProcess } from "../support/node-process.js";
import { authFileWithRoles, type RoleName } from "../support/security.js";

/** A change is picked up in well under this; the polls below give up after it. */
const DEADLINE_MS = 5_000;

/** The SHA-256 fingerprint of the certificate a new TLS connection to `port` is served. */
function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    // Only the certificate is wanted: no trust decision, and ALPN h2 for the gRPC port.
    const socket = connect({ host: "127.0.0.1", port, servername: "localhost", rejectUnauthorized: false, ALPNProtocols: ["h2", "http/1.1"] }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.destroy();
      resolve(fingerprint);
    });
    socket.once("error", reject);
  });
}

const fingerprintOf = (file: string) => new X509Certificate(readFileSync(file)).fingerprint256;

describe("reload on file change", () => {
  let certs: CertFiles;
  let node: NodeProcess;
  let authFile: string;
  let tokens: Record<RoleName, string>;
  let liveCert: string;
  let liveKey: string;
  const channels: RpcChannel[] = [];

  /** Both ports serve the certificate in `file` to a new connection, within the deadline. */
  const serves = (file: string) => Promise.all([node.grpcPort, node.httpPort].map((port) =>
    eventually(`port ${port} to serve ${file}`, async () => ((await servedFingerprint(port)) === fingerprintOf(file) ? true : undefined), DEADLINE_MS)));

  const logged = (text: string) => node.logs.filter((l) => l.includes(text));

  /** A call with `token` over TLS: "OK" or the ConveyorError's code. */
  async function callWith(token: string): Promise<string> {
    const channel = new RpcChannel({ address: node.grpcAddress, ...channelSecurity({ token, tls: { ca: certs.read(certs.caCert) } }) });
    channels.push(channel);
    try {
      await channel.service(AdminService).listQueues({}, { timeoutMs: 5_000 });
      return "OK";
    } catch (e) {
      if (!(e instanceof ConveyorError)) throw e;
      return e.code;
    } finally {
      channel.close();
    }
  }

  const authLines = (entries: Array<{ name: string; token: string; role: RoleName }>) =>
    ["tokens:", ...entries.flatMap((e) => [`  - name: ${e.name}`, `    sha256: ${hashToken(e.token)}`, `    roles: [${e.role}]`])].join("\n") + "\n";

  beforeAll(async () => {
    certs = makeCerts();
    const auth = authFileWithRoles();
    authFile = auth.file;
    tokens = auth.tokens;
    // A folder of its own, as a renewer's would be.
    const live = mkdtempSync(join(tmpdir(), "conveyor-live-tls-"));
    liveCert = join(live, "node.crt");
    liveKey = join(live, "node.key");
    copyFileSync(certs.serverCert, liveCert);
    copyFileSync(certs.serverKey, liveKey);
    node = await NodeProcess.start({ settings: { auth_file: authFile, tls_cert: liveCert, tls_key: liveKey } });
  });

  afterAll(async () => {
    for (const c of channels) c.close();
    await node?.stop();
    node?.cleanup();
  });

  it("a renewed certificate is served to new connections on both ports without SIGHUP", async () => {
    await serves(certs.serverCert);
    const renewed = certs.server("renewed", "IP:127.0.0.1,DNS:localhost");
    expect(fingerprintOf(renewed.cert)).not.toBe(fingerprintOf(certs.serverCert));
    copyFileSync(renewed.cert, liveCert);
    copyFileSync(renewed.key, liveKey);
    await serves(renewed.cert);
    // And it is a working certificate, not only a different one: a client that trusts the CA calls through it.
    expect(await callWith(tokens.reader)).toBe("OK");
    expect(logged("TLS certificate reloaded").every((l) => l.includes('"trigger":"file change"'))).toBe(true);
    expect(logged("TLS certificate reloaded").length).toBeGreaterThan(0);
  });

  it("a half-written certificate keeps the old one with a warning; the next complete write is served", async () => {
    const before = fingerprintOf(liveCert);
    const failures = logged("TLS reload failed").length;
    const third = certs.server("third", "IP:127.0.0.1,DNS:localhost");
    const pem = readFileSync(third.cert, "utf8");
    writeFileSync(liveCert, pem.slice(0, pem.length / 2)); // a writer caught halfway
    await eventually("the failed reload's warning", async () => (logged("TLS reload failed").length > failures ? true : undefined), DEADLINE_MS);
    const warning = JSON.parse(logged("TLS reload failed").at(-1)!) as { level: number; trigger: string };
    expect(warning).toMatchObject({ level: 40, trigger: "file change" });
    for (const port of [node.grpcPort, node.httpPort]) expect(await servedFingerprint(port)).toBe(before);
    expect(await callWith(tokens.reader)).toBe("OK");
    copyFileSync(third.cert, liveCert);
    copyFileSync(third.key, liveKey);
    await serves(third.cert);
  });

  it("the auth file: a token added works, one that does not load keeps the tokens in force, one removed stops; SIGHUP reloads it too", async () => {
    const added = newToken().token;
    expect(await callWith(added)).toBe("UNAUTHENTICATED");
    writeFileSync(authFile, authLines([{ name: "reader-token", token: tokens.reader, role: "reader" }, { name: "added", token: added, role: "reader" }]));
    await eventually("the added token to work", async () => ((await callWith(added)) === "OK" ? true : undefined), DEADLINE_MS);

    const errors = logged("auth file reload failed").length;
    writeFileSync(authFile, "tokens:\n  - name: typo\n    sha256: " + "b".repeat(64) + "\n    roles: [raeder]\n");
    await eventually("the failed reload's error", async () => (logged("auth file reload failed").length > errors ? true : undefined), DEADLINE_MS);
    expect(await callWith(added)).toBe("OK");
    expect(await callWith(tokens.reader)).toBe("OK");

    writeFileSync(authFile, authLines([{ name: "added", token: added, role: "reader" }]));
    await eventually("the removed token to stop working", async () => ((await callWith(tokens.reader)) === "UNAUTHENTICATED" ? true : undefined), DEADLINE_MS);
    expect(await callWith(added)).toBe("OK");

    const sighups = () => logged("auth file reloaded").filter((l) => l.includes('"trigger":"SIGHUP"')).length;
    node.child.kill("SIGHUP");
    await eventually("SIGHUP's auth reload", async () => (sighups() > 0 ? true : undefined), DEADLINE_MS);
    expect(await callWith(added)).toBe("OK");
    for (const t of [added, ...Object.values(tokens)]) expect(node.logs.join("\n")).not.toContain(t);
  });
});
