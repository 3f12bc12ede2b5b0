/**
 * Queue scopes: the glob patterns (`*` only), their parsing from the auth file, and the
 * guard's verdict for each kind of request (named queues, a task by id, every queue).
 */
import { describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { parseAuthPolicy } from "../../src/server/security/auth-file.js";
import type { Identity } from "../../src/server/security/identity.js";
import { globMatches, QueueScope } from "../../src/server/security/queue-scope.js";
import { queueAccessOf } from "../../src/server/security/roles.js";
import { scopeVerdict } from "../../src/server/security/scope-check.js";

const HASH = "a".repeat(64);

describe("queue patterns", () => {
  it("* matches any run of characters, the empty one too; everything else matches itself", () => {
    expect(globMatches("billing-*", "billing-eu")).toBe(true);
    expect(globMatches("billing-*", "billing-")).toBe(true);
    expect(globMatches("billing-*", "billing")).toBe(false);
    expect(globMatches("billing-*", "xbilling-eu")).toBe(false);
    expect(globMatches("*-dlq", "emails-dlq")).toBe(true);
    expect(globMatches("*-dlq", "emails-dlq2")).toBe(false);
    expect(globMatches("a*b*c", "aXXbYYbZc")).toBe(true);
    expect(globMatches("a*b*c", "aXXcYYb")).toBe(false);
    expect(globMatches("emails", "emails")).toBe(true);
    expect(globMatches("emails", "Emails")).toBe(false);
    expect(globMatches("e.mails", "eXmails")).toBe(false); // '.' is not a regex wildcard here
    expect(globMatches("*", "anything")).toBe(true);
  });

  it("a scope allows a queue any of its patterns matches, never a name longer than a queue name", () => {
    const scope = new QueueScope(["billing-*", "emails"]);
    expect(scope.allows("billing-us")).toBe(true);
    expect(scope.allows("emails")).toBe(true);
    expect(scope.allows("emails-2")).toBe(false);
    expect(scope.allows("billing-" + "x".repeat(200))).toBe(false);
    expect(String(scope)).toBe("billing-*, emails");
  });
});

describe("queues in the auth file", () => {
  const policy = (entry: Record<string, unknown>) => parseAuthPolicy({ tokens: [{ name: "t", sha256: HASH, roles: ["reader"], ...entry }] }, "auth.yaml");

  it("a token without queues may touch every queue; with them, only the matching ones", () => {
    expect(policy({}).tokens.get(HASH)!.scope).toBeUndefined();
    expect(policy({ queues: ["billing-*", "emails"] }).tokens.get(HASH)!.scope!.patterns).toEqual(["billing-*", "emails"]);
    const certs = parseAuthPolicy({ certificates: [{ name: "c", common_name: "w1", roles: ["worker"], queues: ["jobs"] }] }, "auth.yaml");
    expect(certs.certificates.get("w1")!.scope!.patterns).toEqual(["jobs"]);
  });

  it("refuses an empty list, a non-list, ? and characters no queue name has, naming the entry", () => {
    expect(() => policy({ queues: [] })).toThrow(/tokens\[0\] \(t\): queues must be a non-empty list/);
    expect(() => policy({ queues: "billing-*" })).toThrow(/non-empty list/);
    expect(() => policy({ queues: ["billing-?"] })).toThrow(/"billing-\?" .*only \* is a wildcard/);
    expect(() => policy({ queues: ["bil ling"] })).toThrow(/queue pattern "bil ling"/);
    expect(() => policy({ queues: [7] })).toThrow(/queue pattern 7/);
  });
});

describe("the scope verdict", () => {
  const scoped: Identity = { name: "billing-bot", roles: new Set(["admin"]), via: "token", scope: new QueueScope(["billing-*"]) };
  const unscoped: Identity = { ...scoped, scope: undefined };
  const tasks = new Map([["in", "billing-eu"], ["out", "payroll"]]);
  const verdict = (rpc: string, request: unknown, who = scoped) => scopeVerdict(rpc, queueAccessOf(rpc)!, who, request, (id) => tasks.get(id));
  const refusal = (v: ReturnType<typeof verdict>) => (v.ok ? undefined : v.error);

  it("a named queue outside the scope is PERMISSION_DENIED naming the queue and the identity", () => {
    expect(verdict("AdminService/PauseQueue", { queue: "billing-eu" }).ok).toBe(true);
    const e = refusal(verdict("TaskService/EnqueueBatch", { tasks: [{ queue: "billing-eu" }, { queue: "payroll" }] }));
    expect(e).toBeInstanceOf(ConveyorError);
    expect(e).toMatchObject({ code: "PERMISSION_DENIED", reason: "QUEUE_NOT_IN_SCOPE", details: { queue: "payroll" } });
    expect(e!.message).toBe('billing-bot (queues: billing-*) may not touch queue "payroll" (TaskService/EnqueueBatch)');
    expect(verdict("AdminService/PauseQueue", { queue: "payroll" }, unscoped).ok).toBe(true);
  });

  it("a task in a queue outside the scope is NOT_FOUND, exactly as an unknown id", () => {
    expect(verdict("AdminService/DeleteTask", { id: "in" }).ok).toBe(true);
    expect(verdict("AdminService/DeleteTask", { id: "nope" }).ok).toBe(true); // the handler answers NOT_FOUND
    const e = refusal(verdict("TaskService/GetTask", { id: "out" }));
    expect(e).toMatchObject({ code: "NOT_FOUND", reason: "TASK_NOT_FOUND", message: 'task "out" not found' });
  });

  it("a request about every queue is cut to the scope, or refused when it cannot be", () => {
    const list = verdict("AdminService/ListQueues", {});
    expect(list.ok && list.narrow!({ queues: [{ name: "billing-eu" }, { name: "payroll" }] })).toEqual({ queues: [{ name: "billing-eu" }] });
    expect(refusal(verdict("AdminService/GetActivity", { queue: "" }))).toMatchObject({ code: "PERMISSION_DENIED", reason: "QUEUE_NOT_IN_SCOPE", message: expect.stringContaining("for every queue") });
    expect(verdict("AdminService/GetActivity", { queue: "billing-eu" }).ok).toBe(true);
    expect(refusal(verdict("AdminService/SetStrategies", { type: "t" }))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(verdict("AdminService/GetClusterStatus", {}).ok).toBe(true);
  });
});

describe("the auth file entry `conveyord token new --name` prints", () => {
  it("loads as it is printed, scoped or not; a bad role or pattern is refused with the parser's words", async () => {
    const { authFileEntry } = await import("../../src/server/security/auth-entry.js");
    const { parse } = await import("yaml");
    const text = authFileEntry({ name: "billing", sha256: HASH, roles: "producer,reader", queues: "*-billing, emails" });
    const loaded = parseAuthPolicy(parse(`tokens:\n${text}`), "printed").tokens.get(HASH)!;
    expect(loaded).toMatchObject({ name: "billing", roles: new Set(["producer", "reader"]) });
    expect(loaded.scope!.patterns).toEqual(["*-billing", "emails"]);
    expect(parseAuthPolicy(parse(`tokens:\n${authFileEntry({ name: "all", sha256: HASH, roles: "reader" })}`), "printed").tokens.get(HASH)!.scope).toBeUndefined();
    expect(() => authFileEntry({ name: "x", sha256: HASH, roles: "wrtier" })).toThrow(/unknown role "wrtier"/);
    expect(() => authFileEntry({ name: "x", sha256: HASH, roles: "reader", queues: "billing-?" })).toThrow(/only \* is a wildcard/);
  });
});
