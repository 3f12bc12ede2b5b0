/**
 * THE seam where a call's identity is established, for both transports: gRPC metadata
 * `authorization: Bearer <token>` and the HTTP `Authorization` header (the JSON API copies
 * it into the call's metadata, so both arrive here the same way), or a verified client
 * certificate's subject CN (mTLS, either port). Services never parse
 * credentials; they receive an Identity (`identityOf(call)`). A node-to-node identity
 * (cluster token or peer certificate) is one more branch of `identify`, nothing else.
 */
import { ConveyorError } from "../../base/errors.js";
import { AUTHORIZATION_MAX_CHARS } from "../../base/limits.js";
import type { AuthPolicy } from "./auth-file.js";
import type { QueueScope } from "./queue-scope.js";
import { ROLES, type Role } from "./roles.js";
import { hashToken } from "./tokens.js";

export type Transport = "grpc" | "http";

export interface Identity {
  /** The token's name in the auth file; "anonymous" when auth is off. */
  name: string;
  roles: ReadonlySet<Role>;
  /** How it was established: a bearer token, a client certificate, or nothing because auth is off. */
  via: "token" | "certificate" | "open";
  /** The queues it may touch (the guard holds it to them); undefined: every queue. */
  scope: QueueScope | undefined;
}

/** What a call presented, taken from the transport. */
export interface Credentials {
  transport: Transport;
  /** The raw Authorization value, if any (never logged). */
  authorization?: string | undefined;
  /** The subject CN of a client certificate the TLS layer verified (mTLS), if any. */
  peerCommonName?: string | undefined;
}

/** With auth off every caller may do everything (the node only listens on loopback then, unless told otherwise). */
export const OPEN_IDENTITY: Identity = { name: "anonymous", roles: new Set(ROLES), via: "open", scope: undefined };

export class Authenticator {
  constructor(private policy: AuthPolicy | undefined) {}

  /**
   * A reloaded auth file takes effect for the next call. Only while auth is on: whether it
   * is on was decided at start, with the fail-closed check, and a reload never turns it off.
   */
  replace(policy: AuthPolicy): void {
    if (!this.policy) throw new Error("authentication is off (no auth_file at start): nothing to reload");
    this.policy = policy;
  }

  get enabled(): boolean {
    return this.policy !== undefined;
  }

  get metricsPublic(): boolean {
    return this.policy === undefined || this.policy.metricsPublic;
  }

  /** The caller's identity, or UNAUTHENTICATED saying what is missing or wrong (never echoing the token). */
  identify(credentials: Credentials): Identity {
    if (!this.policy) return OPEN_IDENTITY;
    const header = credentials.authorization?.trim();
    // A token, when sent, decides (a shared client certificate may carry several callers).
    if (!header && credentials.peerCommonName !== undefined) {
      const holder = this.policy.certificates.get(credentials.peerCommonName);
      if (!holder) {
        throw new ConveyorError("UNAUTHENTICATED", "CREDENTIALS_UNKNOWN",
          `the client certificate's subject CN ${JSON.stringify(credentials.peerCommonName)} is not in the node's auth file`);
      }
      return { name: holder.name, roles: holder.roles, via: "certificate", scope: holder.scope };
    }
    if (!header) {
      throw new ConveyorError("UNAUTHENTICATED", "CREDENTIALS_REQUIRED",
        `the node requires a token: send "authorization: Bearer <token>" (SDK option token, CLI --token or CONVEYOR_TOKEN)`);
    }
    const match = header.length <= AUTHORIZATION_MAX_CHARS ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    if (!match) throw new ConveyorError("UNAUTHENTICATED", "CREDENTIALS_UNKNOWN", `the authorization value is not "Bearer <token>"`);
    const principal = this.policy.tokens.get(hashToken(match[1]!));
    if (!principal) throw new ConveyorError("UNAUTHENTICATED", "CREDENTIALS_UNKNOWN", "the token is not one this node knows");
    return { name: principal.name, roles: principal.roles, via: "token", scope: principal.scope };
  }
}

const identities = new WeakMap<object, Identity>();

/** The identity the guard established for `call` (services read it; OPEN_IDENTITY for a call that was not guarded). */
export const identityOf = (call: object): Identity => identities.get(call) ?? OPEN_IDENTITY;

export const setIdentity = (call: object, identity: Identity): void => {
  identities.set(call, identity);
};
