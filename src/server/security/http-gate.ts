/**
 * What the HTTP port checks before any route: the Host header against an allow-list, and
 * for /metrics a reader's token (unless metrics are public) without queue scopes: the
 * series span every queue, and cutting Prometheus text by label is a filter nobody would
 * trust to stay complete as metrics are added. The JSON API is authenticated here on its
 * headers (the caller's credentials and the RPC's roles), before its body is read, and
 * again with the queue scope in the guard, like gRPC; the dashboard's static files hold no data and stay open, so
 * the page can load and ask for a token.
 *
 * The Host check closes DNS rebinding: a page on rebind.example whose name now resolves
 * to 127.0.0.1 talks to this port with `Host: rebind.example:8080` and a matching Origin,
 * which the Origin check alone lets through. Only a loopback name or a Host the operator
 * named is served, with auth on or off. /healthz answers every Host: probes address
 * nodes by IP, and it tells nothing.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { ConveyorError } from "../../base/errors.js";
import { quote } from "../../base/limits.js";
import { admitHttpApiCall } from "./admission.js";
import { hostOf, isLoopback } from "./exposure.js";
import type { TLSSocket } from "node:tls";
import type { AuthFailures } from "./failures.js";
import { commonNameOf } from "./guard.js";
import type { Authenticator } from "./identity.js";
import { METRICS_ROLES } from "./roles.js";
import { SCOPE_REFUSAL } from "./scope-check.js";

export interface HttpGateOptions {
  authn: Authenticator;
  failures: AuthFailures;
  /** The HTTP listen address (its host is allowed unless it is a wildcard) and the operator's extra names. */
  httpAddress: string;
  allowedHosts: readonly string[];
}

const WILDCARDS = new Set(["", "0.0.0.0", "::"]);
/** The JSON API's paths (json-api.ts serves them; the gate authenticates them first). */
const API_PREFIX = "/api/";

/** Answers (and returns true) when the request is refused; false lets the routes run. */
export function httpGate(options: HttpGateOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const allowed = new Set(options.allowedHosts.map((h) => h.trim().toLowerCase()).filter((h) => h !== ""));
  const own = hostOf(options.httpAddress).toLowerCase();
  if (!WILDCARDS.has(own)) allowed.add(own);
  const hostAllowed = (host: string) => isLoopback(host) || allowed.has(host);

  return (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (path === "/healthz") return false;
    const hostHeader = req.headers.host ?? "";
    const host = hostOf(hostHeader).toLowerCase();
    if (!hostAllowed(host)) {
      options.failures.record({ transport: "http", what: path, reason: "HOST_NOT_ALLOWED", peer: req.socket.remoteAddress ?? "" });
      refuse(res, 403, "PERMISSION_DENIED", "HOST_NOT_ALLOWED",
        `Host ${quote(hostHeader)} is not one this node serves; add it to http_allowed_hosts if it names this node`);
      return true;
    }
    // The JSON API: the credentials and the RPC's roles on the headers, before the body is read (admission.ts).
    if (path.startsWith(API_PREFIX)) {
      try {
        admitHttpApiCall(options, req, path.slice(API_PREFIX.length));
      } catch (error) {
        if (!(error instanceof ConveyorError)) throw error;
        refuse(res, error.code === "UNAUTHENTICATED" ? 401 : 403, error.code, error.reason, error.message, error.details);
        return true;
      }
      return false;
    }
    if (path === "/metrics" && req.method === "GET" && !options.authn.metricsPublic) {
      try {
        const socket = req.socket as Partial<TLSSocket>;
        const identity = options.authn.identify({
          transport: "http", authorization: req.headers.authorization, peerCommonName: commonNameOf(socket.getPeerCertificate?.()),
        });
        if (!METRICS_ROLES.some((r) => identity.roles.has(r))) {
          options.failures.record({ transport: "http", what: path, reason: "ROLE_REQUIRED", identity: identity.name, peer: req.socket.remoteAddress ?? "" });
          refuse(res, 403, "PERMISSION_DENIED", "ROLE_REQUIRED", `${identity.name} may not read /metrics; it needs one of: ${METRICS_ROLES.join(", ")}`);
          return true;
        }
        if (identity.scope) {
          options.failures.record({ transport: "http", what: path, reason: SCOPE_REFUSAL, identity: identity.name, peer: req.socket.remoteAddress ?? "" });
          refuse(res, 403, "PERMISSION_DENIED", SCOPE_REFUSAL,
            `${identity.name} (queues: ${identity.scope}) may not read /metrics: its series span every queue; use an identity without queue scopes`);
          return true;
        }
      } catch (error) {
        if (!(error instanceof ConveyorError)) throw error;
        options.failures.record({ transport: "http", what: path, reason: error.reason, peer: req.socket.remoteAddress ?? "" });
        refuse(res, 401, error.code, error.reason, error.message);
        return true;
      }
    }
    return false;
  };
}

function refuse(res: ServerResponse, status: number, code: string, reason: string, message: string, details?: Record<string, string>): void {
  const body = JSON.stringify({ code, reason, message, ...(details ? { details } : {}) });
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body), "cache-control": "no-store",
    ...(status === 401 ? { "www-authenticate": 'Bearer realm="conveyor"' } : {}),
  });
  res.end(body);
}
