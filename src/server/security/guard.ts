/**
 * Wraps a service implementation so every call is authenticated and authorised (its role,
 * then its identity's queue scope: scope-check.ts) before its handler runs, and every
 * admin action is audited with the identity that did it.
 * The gRPC server and the JSON API both serve the wrapped implementation, so the two
 * transports cannot disagree about who may do what.
 */
import { toJson, type DescMethod } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { Logger } from "pino";
import { ConveyorError } from "../../base/errors.js";
import { AUDIT_REQUEST_MAX_BYTES, truncateText } from "../../base/limits.js";
import type { UnaryImpl } from "../../rpc/service-definition.js";
import { setIdentity, type Authenticator, type Credentials, type Identity, type Transport } from "./identity.js";
import type { AuthFailures } from "./failures.js";
import { FORWARDED_BY, ON_BEHALF_OF } from "./on-behalf-of.js";
import { isAdminOnly, queueAccessOf, rolesFor, type Role } from "./roles.js";
import { SCOPE_REFUSAL, scopeVerdict } from "./scope-check.js";

export interface GuardDeps {
  authn: Authenticator;
  failures: AuthFailures;
  /** Audit lines go here (one per admin action, `audit: true`). */
  logger: Logger;
  /** The queue holding task `id`, undefined for an unknown id: scoped calls that address a task by id. */
  queueOfTask: (id: string) => string | undefined;
}

/** What a call object offers: grpc-js ServerUnaryCall, or the JSON API's stand-in (which marks itself `transport: "http"`). */
export interface CallLike {
  request: unknown;
  metadata: { get(key: string): unknown[] };
  getPeer(): string;
  getAuthContext?(): { sslPeerCertificate?: { subject?: { CN?: string | string[] } } | undefined };
  transport?: Transport;
}

export function credentialsOf(call: CallLike): Credentials {
  const text = (key: string) => {
    const value = call.metadata.get(key)[0];
    return typeof value === "string" ? value : undefined;
  };
  return {
    transport: call.transport ?? "grpc", authorization: text("authorization"),
    peerCommonName: commonNameOf(call.getAuthContext?.().sslPeerCertificate),
    onBehalfOf: text(ON_BEHALF_OF), forwardedBy: text(FORWARDED_BY),
  };
}

/** The subject CN of a peer certificate the TLS layer verified (unverified ones never get this far: mTLS rejects them). */
export function commonNameOf(certificate: { subject?: { CN?: string | string[] } } | undefined): string | undefined {
  const cn = certificate?.subject?.CN;
  return Array.isArray(cn) ? cn[0] : cn || undefined;
}

export function guardService<S extends GenService<GenServiceMethods>>(service: S, impl: UnaryImpl<S>, deps: GuardDeps): UnaryImpl<S> {
  const handlers = impl as unknown as Record<string, (call: CallLike) => Promise<unknown>>;
  const guarded: Record<string, (call: CallLike) => Promise<unknown>> = {};
  for (const method of service.methods as DescMethod[]) {
    const rpc = `${service.name}/${method.name}`;
    const roles = rolesFor(rpc);
    const access = queueAccessOf(rpc);
    // Fail closed: an RPC without a decision in the table is not served at all.
    if (!roles || !access) throw new Error(`${rpc} is not in the RPC table (src/server/security/roles.ts)`);
    const handler = handlers[method.localName]!.bind(impl);
    const audited = isAdminOnly(rpc);
    guarded[method.localName] = async (call) => {
      const credentials = credentialsOf(call);
      const identity = identifyWithRole(rpc, roles, credentials, call.getPeer(), deps);
      const verdict = scopeVerdict(rpc, access, identity, call.request, deps.queueOfTask);
      if (!verdict.ok) {
        deps.failures.record({
          transport: credentials.transport, what: rpc, reason: SCOPE_REFUSAL, identity: identity.name, peer: call.getPeer(),
          ...(verdict.queue !== undefined ? { queue: verdict.queue } : {}),
        });
        throw verdict.error;
      }
      setIdentity(call, identity);
      const answer = verdict.narrow ?? ((response: unknown) => response);
      if (!audited) return answer(await handler(call));
      const audit = {
        audit: true, identity: identity.name, via: identity.via, transport: credentials.transport, rpc, request: requestText(method, call.request),
        ...(identity.forwardedBy !== undefined ? { forwardedBy: identity.forwardedBy } : {}),
      };
      try {
        const response = answer(await handler(call));
        deps.logger.info({ ...audit, outcome: "OK" }, "admin action");
        return response;
      } catch (error) {
        deps.logger.info({ ...audit, outcome: error instanceof ConveyorError ? error.code : "INTERNAL" }, "admin action");
        throw error;
      }
    };
  }
  return guarded as unknown as UnaryImpl<S>;
}

/**
 * The caller's identity if it holds one of `roles`; else the refusal, recorded. It needs
 * only what the transport's headers carry, so admission.ts runs it before a request's
 * body is read, and the guard again on the decoded call.
 */
export function identifyWithRole(
  rpc: string, roles: readonly Role[], credentials: Credentials, peer: string, deps: Pick<GuardDeps, "authn" | "failures">,
): Identity {
  let identity: Identity;
  try {
    identity = deps.authn.identify(credentials);
  } catch (error) {
    if (error instanceof ConveyorError) deps.failures.record({ transport: credentials.transport, what: rpc, reason: error.reason, peer });
    throw error;
  }
  if (!roles.some((r) => identity.roles.has(r))) {
    deps.failures.record({ transport: credentials.transport, what: rpc, reason: "ROLE_REQUIRED", identity: identity.name, peer });
    throw new ConveyorError("PERMISSION_DENIED", "ROLE_REQUIRED",
      `${identity.name} (roles: ${[...identity.roles].join(", ")}) may not call ${rpc}; it needs one of: ${roles.join(", ")}`,
      undefined, { details: { needs: roles.join(",") } });
  }
  return identity;
}

/**
 * The request as JSON for the audit line, cut short. A task's contents (a schedule's
 * `payload` and `metadata`) may hold secrets and stay out of the log: only their sizes
 * are written.
 */
function requestText(method: DescMethod, request: unknown): string {
  try {
    return truncateText(JSON.stringify(withoutContents(toJson(method.input, request as never))), AUDIT_REQUEST_MAX_BYTES);
  } catch {
    return "(not encodable)";
  }
}

/** `json` with every `payload` (base64) and `metadata` replaced by its size. */
function withoutContents(json: unknown): unknown {
  if (Array.isArray(json)) return json.map(withoutContents);
  if (json === null || typeof json !== "object") return json;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(json)) {
    if (key === "payload" && typeof value === "string") out[key] = `(${Buffer.from(value, "base64").length} bytes)`;
    else if (key === "metadata" && value !== null && typeof value === "object") out[key] = `(${Object.keys(value).length} entries)`;
    else out[key] = withoutContents(value);
  }
  return out;
}
