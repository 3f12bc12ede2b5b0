/**
 * Authentication before a request's body is read: the guard's header-only checks (who is
 * calling, and may that identity call this RPC at all), run on the transport's headers.
 * A caller without valid credentials, or without a role the RPC needs, is refused before
 * the node reads, buffers or decodes what it sent, so such a request costs the node no
 * more than a small valid one (a body of a million nested brackets used to be parsed
 * first: ~0.7 s of the node's only thread for a 401 that the headers already decided).
 *
 * The guard (guard.ts) still runs on every call let through: the queue scope needs the
 * decoded request, and the checks here are a cheap early copy of its first two, made by
 * the same function, so the two cannot disagree.
 */
import type { IncomingMessage } from "node:http";
import type { TLSSocket } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import type { Admit } from "../../rpc/admission.js";
import type { AuthFailures } from "./failures.js";
import { credentialsOf, identifyWithRole } from "./guard.js";
import type { Authenticator, Credentials, Transport } from "./identity.js";
import { rolesFor } from "./roles.js";

export interface AdmissionDeps {
  authn: Authenticator;
  failures: AuthFailures;
}

/** gRPC reflection tells the schema, which the package publishes, and no data: open (as before). */
const OPEN_PREFIXES = ["/grpc.reflection."];

/** The RPC table's name of a `/package.Service/Method` path: `Service/Method`. */
function rpcOf(path: string): string {
  const slash = path.lastIndexOf("/");
  const service = path.slice(0, Math.max(slash, 0));
  return `${service.slice(service.lastIndexOf(".") + 1)}/${path.slice(slash + 1)}`;
}

/**
 * Refuses the call when its credentials fail or its identity lacks every role the RPC's
 * row names. A path without a row (the session stream, whose calls the guard checks one
 * by one, or an unknown method) still needs a valid identity: fail closed.
 */
function admit(deps: AdmissionDeps, path: string, credentials: Credentials, peer: string): void {
  if (!deps.authn.enabled) return;
  const rpc = rpcOf(path);
  const roles = rolesFor(rpc);
  if (roles) {
    identifyWithRole(rpc, roles, credentials, peer, deps);
    return;
  }
  try {
    deps.authn.identify(credentials);
  } catch (error) {
    const reason = (error as { reason?: string }).reason ?? "CREDENTIALS_UNKNOWN";
    deps.failures.record({ transport: credentials.transport, what: rpc, reason, peer });
    throw error;
  }
}

/** For the gRPC server's admission interceptor (rpc/admission.ts). */
export function grpcAdmission(deps: AdmissionDeps): Admit {
  return ({ path, metadata, peer, peerCommonName }) => {
    if (OPEN_PREFIXES.some((prefix) => path.startsWith(prefix))) return undefined;
    const credentials = credentialsOf({
      request: undefined, metadata, getPeer: () => peer,
      getAuthContext: () => ({ sslPeerCertificate: peerCommonName === undefined ? undefined : { subject: { CN: peerCommonName } } }),
    });
    try {
      admit(deps, path, credentials, peer);
      return undefined;
    } catch (error) {
      return error as Error;
    }
  };
}

/**
 * For a JSON API request (`/api/<package.Service>/<Method>`), on its headers: throws the
 * refusal (a ConveyorError) before the body is read.
 */
export function admitHttpApiCall(deps: AdmissionDeps, req: IncomingMessage, apiPath: string): void {
  const socket = req.socket as Partial<TLSSocket>;
  const metadata = new grpc.Metadata();
  if (req.headers.authorization !== undefined) metadata.set("authorization", req.headers.authorization);
  const transport: Transport = "http";
  const credentials = credentialsOf({
    request: undefined, metadata, transport, getPeer: () => req.socket.remoteAddress ?? "",
    getAuthContext: () => ({ sslPeerCertificate: socket.getPeerCertificate?.() }),
  });
  admit(deps, `/${apiPath}`, credentials, req.socket.remoteAddress ?? "");
}

