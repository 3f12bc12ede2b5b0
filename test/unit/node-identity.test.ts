/**
 * Node-to-node identity, the pure parts: the cluster secret file's rules, and what the
 * authenticator makes of a cluster credential and of `conveyor-on-behalf-of` (trusted
 * from a node only). The real-process behaviour is in test/cluster/cluster-auth.test.ts.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { parseAuthPolicy } from "../../src/server/security/auth-file.js";
import { CLUSTER_SECRET_MIN_CHARS, ClusterSecret, ClusterSecretHolder, newClusterSecret } from "../../src/server/security/cluster-secret.js";
import { Authenticator, OPEN_IDENTITY, type Credentials } from "../../src/server/security/identity.js";
import { encodeOnBehalfOf } from "../../src/server/security/on-behalf-of.js";
import { QueueScope } from "../../src/server/security/queue-scope.js";
import { SecurityReloader } from "../../src/server/security/reload.js";
import { newToken } from "../../src/server/security/tokens.js";

const secret = newClusterSecret();
const other = newClusterSecret();
const producer = newToken();
const policy = parseAuthPolicy({
  tokens: [{ name: "producer-token", sha256: producer.sha256, roles: ["producer"] }],
  certificates: [{ name: "node-cert", common_name: "n9.internal", roles: ["node"] }],
}, "test");

function authn(text = `${secret}\n`): Authenticator {
  return new Authenticator(policy, new ClusterSecretHolder(ClusterSecret.parse(text, "test")));
}

const grpc = (c: Omit<Credentials, "transport">): Credentials => ({ transport: "grpc", ...c });
const scopedCaller = { name: "billing-bot", roles: new Set(["producer"] as const), via: "token" as const, scope: new QueueScope(["billing-*"]) };

function refusal(run: () => unknown): { code: string; reason: string; message: string } {
  try {
    run();
  } catch (e) {
    if (e instanceof ConveyorError) return { code: e.code, reason: e.reason, message: e.message };
    throw e;
  }
  throw new Error("expected a refusal");
}

describe("cluster secret file", () => {
  it("presents the first secret and accepts every listed one (rotation), ignoring comments and blank lines", () => {
    const s = ClusterSecret.parse(`# rotated 2026-12\n\n${secret}\n${other}\n`, "f");
    expect(s.presented).toBe(secret);
    expect(s.accepts(secret)).toBe(true);
    expect(s.accepts(other)).toBe(true);
    expect(s.accepts(newClusterSecret())).toBe(false);
    expect(s.accepts("")).toBe(false);
  });

  it("refuses an empty file, a short secret and two words on a line, naming the line and never the secret", () => {
    expect(() => ClusterSecret.parse("# nothing\n", "f")).toThrow(/holds no secret/);
    const short = "x".repeat(CLUSTER_SECRET_MIN_CHARS - 1);
    expect(() => ClusterSecret.parse(`${short}\n`, "f")).toThrow(/line 1 .* at least 32/);
    let message = "";
    try {
      ClusterSecret.parse(`${secret}\n${secret} extra\n`, "f");
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/line 2 holds more than one word/);
    expect(message).not.toContain(secret);
  });
});

describe("cluster secret reload", () => {
  it("SIGHUP puts a new secret in force for the next call; a file that does not load keeps the one in force", () => {
    const file = join(mkdtempSync(join(tmpdir(), "conveyor-secret-")), "cluster.secret");
    writeFileSync(file, `${secret}\n`);
    const holder = new ClusterSecretHolder(ClusterSecret.read(file));
    const a = new Authenticator(policy, holder);
    const reloader = new SecurityReloader({ authn: a, tls: undefined, authFile: undefined, clusterSecret: { path: file, holder }, logger: pino({ level: "silent" }) });
    writeFileSync(file, `${other}\n${secret}\n`); // rotation, step 2: the new one presented, both accepted
    reloader.reload("SIGHUP");
    expect(holder.secret.presented).toBe(other);
    expect(a.identify(grpc({ authorization: `Cluster ${secret}` })).via).toBe("cluster secret");
    writeFileSync(file, "short\n");
    reloader.reload("SIGHUP");
    expect(holder.secret.presented).toBe(other);
    writeFileSync(file, `${other}\n`); // step 3: the old one removed
    reloader.reload("file change");
    expect(refusal(() => a.identify(grpc({ authorization: `Cluster ${secret}` }))).code).toBe("UNAUTHENTICATED");
  });
});

describe("node identity", () => {
  it("the cluster secret makes the caller a node, named by the node id it claims; a wrong one is UNAUTHENTICATED", () => {
    const node = authn().identify(grpc({ authorization: `Cluster ${secret}`, forwardedBy: "n1" }));
    expect(node).toMatchObject({ name: "node n1", via: "cluster secret" });
    expect([...node.roles]).toEqual(["node"]);
    const wrong = refusal(() => authn().identify(grpc({ authorization: `Cluster ${other}`, forwardedBy: "n1" })));
    expect(wrong).toMatchObject({ code: "UNAUTHENTICATED", reason: "CREDENTIALS_UNKNOWN" });
    expect(wrong.message).toMatch(/cluster_secret_file/);
    expect(wrong.message).not.toContain(other);
    // A node without a secret configured accepts none.
    expect(refusal(() => new Authenticator(policy).identify(grpc({ authorization: `Cluster ${secret}` }))).code).toBe("UNAUTHENTICATED");
  });

  it("a node's on-behalf-of identity is the caller's, with its roles and queue scope", () => {
    const caller = authn().identify(grpc({ authorization: `Cluster ${secret}`, forwardedBy: "n1", onBehalfOf: encodeOnBehalfOf(scopedCaller) }));
    expect(caller).toMatchObject({ name: "billing-bot", via: "token", forwardedBy: "node n1" });
    expect([...caller.roles]).toEqual(["producer"]);
    expect(caller.scope?.allows("billing-eu")).toBe(true);
    expect(caller.scope?.allows("payroll")).toBe(false);
    // A certificate the auth file maps to the node role may vouch too.
    const viaCert = authn().identify(grpc({ peerCommonName: "n9.internal", onBehalfOf: encodeOnBehalfOf(scopedCaller) }));
    expect(viaCert.name).toBe("billing-bot");
  });

  it("on-behalf-of from a caller that is not a node is PERMISSION_DENIED, never trusted", () => {
    const admin = { name: "root", roles: new Set(["admin"] as const), via: "token" as const, scope: undefined };
    const denied = refusal(() => authn().identify(grpc({ authorization: `Bearer ${producer.token}`, onBehalfOf: encodeOnBehalfOf(admin) })));
    expect(denied).toMatchObject({ code: "PERMISSION_DENIED", reason: "ROLE_REQUIRED" });
    expect(denied.message).toMatch(/producer-token is not a node/);
  });

  it("a node never vouches for an open identity (its own auth off) or for another node", () => {
    const fromOpen = refusal(() => authn().identify(grpc({ authorization: `Cluster ${secret}`, onBehalfOf: encodeOnBehalfOf(OPEN_IDENTITY) })));
    expect(fromOpen).toMatchObject({ code: "PERMISSION_DENIED", reason: "FORWARDED_IDENTITY_REFUSED" });
    expect(fromOpen.message).toMatch(/authentication off/);
    const node = { name: "node n2", roles: new Set(["node"] as const), via: "token" as const, scope: undefined };
    expect(refusal(() => authn().identify(grpc({ authorization: `Cluster ${secret}`, onBehalfOf: encodeOnBehalfOf(node) }))).code).toBe("PERMISSION_DENIED");
    expect(refusal(() => authn().identify(grpc({ authorization: `Cluster ${secret}`, onBehalfOf: "not-json" }))).code).toBe("PERMISSION_DENIED");
  });

  it("the auth file keeps the node role to certificates, alone", () => {
    expect(() => parseAuthPolicy({ tokens: [{ name: "t", sha256: producer.sha256, roles: ["node"] }] }, "f")).toThrow(/node role is not for tokens/);
    expect(() => parseAuthPolicy({ certificates: [{ name: "c", common_name: "x", roles: ["node", "admin"] }] }, "f")).toThrow(/stands alone/);
    expect(() => parseAuthPolicy({ certificates: [{ name: "c", common_name: "x", roles: ["node"], queues: ["a*"] }] }, "f")).toThrow(/stands alone/);
  });
});
