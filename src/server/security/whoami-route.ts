/**
 * `GET /auth/whoami`: the caller's own name, roles and queue patterns (null: every
 * queue), so the dashboard can hide the actions its token cannot do (the node still
 * refuses them: hiding is a courtesy, the guard is the check). 401 with the node's reason when auth is on and the credentials fail.
 */
import type { TLSSocket } from "node:tls";
import { ConveyorError } from "../../base/errors.js";
import type { HttpRoute } from "../http.js";
import { commonNameOf } from "./guard.js";
import type { Authenticator } from "./identity.js";

export const WHOAMI_PATH = "/auth/whoami";

export function whoamiRoute(authn: Authenticator): HttpRoute {
  return (req, res) => {
    if ((req.url ?? "/").split("?")[0] !== WHOAMI_PATH) return false;
    let status = 200;
    let body: object;
    try {
      const socket = req.socket as Partial<TLSSocket>;
      const identity = authn.identify({
        transport: "http", authorization: req.headers.authorization, peerCommonName: commonNameOf(socket.getPeerCertificate?.()),
      });
      body = { auth: authn.enabled, name: identity.name, roles: [...identity.roles], queues: identity.scope ? identity.scope.patterns : null };
    } catch (error) {
      if (!(error instanceof ConveyorError)) throw error;
      status = 401;
      body = { code: error.code, reason: error.reason, message: error.message };
    }
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text), "cache-control": "no-store" });
    res.end(text);
    return true;
  };
}
