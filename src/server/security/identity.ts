/**
 * THE seam where a call's identity is established, for both transports: gRPC metadata
 * `authorization: Bearer <token>` and the HTTP `Authorization` header (the JSON API copies
 * it into the call's metadata, so both arrive here the same way), or a verified client
 * certificate's subject CN (mTLS, either port). Services never parse
 * credentials; they receive an Identity (`identityOf(call)`).
 *
 * Nodes are one more branch: `authorization: Cluster <secret>` (cluster-secret.ts), or a
 * client certificate the auth file maps to the `node` role. A node's own identity may
 * only call ClusterService; on a forwarded call it vouches for the caller it forwards for
 * (`conveyor-on-behalf-of`, on-behalf-of.ts), and that caller's roles and queue scope are
 * what the guard applies. The metadata from a caller that is not a node is refused.
 */
import { ConveyorError } from "../../base/errors.js";
import { AUTHORIZATION_MAX_CHARS } from "../../base/limits.js";
import type { AuthPolicy } from "./auth-file.js";
import { CLUSTER_SCHEME, type ClusterSecretHolder } from "./cluster-secret.js";
import { decodeOnBehalfOf, ON_BEHALF_OF } from "./on-behalf-of.js";
import type { QueueScope } from "./queue-scope.js";
import { ROLES, type Role } from "./roles.js";
import { hashToken } from "./tokens.js";

export type Transport = "grpc" | "http";

export interface Identity {
  /** The token's name in the auth file; "anonymous" when auth is off. */
  name: string;
  roles: ReadonlySet<Role>;
  /** How it was established: a bearer token, a client certificate, the cluster secret (a node), or nothing because auth is off. */
  via: "token" | "certificate" | "cluster secret" | "open";
  /** The queues it may touch (the guard holds it to them); undefined: every queue. */
  scope: QueueScope | undefined;
  /** Set when a node forwarded the call: that node's identity name (the caller was authenticated there). */
  forwardedBy?: string | undefined;
}

/** What a call presented, taken from the transport. */
export interface Credentials {
  transport: Transport;
  /** The raw Authorization value, if any (never logged). */
  authorization?: string | undefined;
  /** The subject CN of a client certificate the TLS layer verified (mTLS), if any. */
  peerCommonName?: string | undefined;
  /** `conveyor-on-behalf-of`: the caller a forwarding node vouches for (trusted only from a node). */
  onBehalfOf?: string | undefined;
  /** `conveyor-forwarded-by`: the node id a node-to-node call claims (names the node in logs; proves nothing). */
  forwardedBy?: string | undefined;
}

/** With auth off every caller may do everything (the node only listens on loopback then, unless told otherwise). */
export const OPEN_IDENTITY: Identity = { name: "anonymous", roles: new Set(ROLES), via: "open", scope: undefined };

export class Authenticator {
  constructor(
    private policy: AuthPolicy | undefined,
    /** The cluster secret nodes present; undefined: no node is known by a secret. */
    private readonly clusterSecret?: ClusterSecretHolder,
  ) {}

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

  /**
   * The caller's identity, or UNAUTHENTICATED saying what is missing or wrong (never
   * echoing the token); on a forwarded call, the caller the forwarding node vouches for.
   */
  identify(credentials: Credentials): Identity {
    if (!this.policy) return OPEN_IDENTITY;
    const presenter = this.presenter(this.policy, credentials);
    if (credentials.onBehalfOf === undefined) return presenter;
    if (!presenter.roles.has("node")) {
      throw new ConveyorError("PERMISSION_DENIED", "ROLE_REQUIRED",
        `${presenter.name} is not a node: only a node (cluster_secret_file, or a certificate with the node role) may send ${ON_BEHALF_OF}`,
        undefined, { details: { needs: "node" } });
    }
    return decodeOnBehalfOf(credentials.onBehalfOf, presenter.name);
  }

  /** Who presented the call's credentials. */
  private presenter(policy: AuthPolicy, credentials: Credentials): Identity {
    const header = credentials.authorization?.trim();
    // A token, when sent, decides (a shared client certificate may carry several callers).
    if (!header && credentials.peerCommonName !== undefined) {
      const holder = policy.certificates.get(credentials.peerCommonName);
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
    if (!match) {
      const node = header.length <= AUTHORIZATION_MAX_CHARS ? CLUSTER_AUTHORIZATION.exec(header) : null;
      if (node) return this.node(node[1]!, credentials.forwardedBy);
      throw new ConveyorError("UNAUTHENTICATED", "CREDENTIALS_UNKNOWN", `the authorization value is not "Bearer <token>"`);
    }
    const principal = policy.tokens.get(hashToken(match[1]!));
    if (!principal) throw new ConveyorError("UNAUTHENTICATED", "CREDENTIALS_UNKNOWN", "the token is not one this node knows");
    return { name: principal.name, roles: principal.roles, via: "token", scope: principal.scope };
  }

  /** A node, if `secret` is the cluster's. */
  private node(secret: string, nodeId: string | undefined): Identity {
    if (!this.clusterSecret?.secret.accepts(secret)) {
      throw new ConveyorError("UNAUTHENTICATED", "CREDENTIALS_UNKNOWN", this.clusterSecret
        ? `the cluster secret ${nodeId ? `node ${JSON.stringify(nodeId)}` : "the caller"} presented is not this node's: every node needs the same cluster_secret_file`
        : "this node has no cluster_secret_file, so it accepts no cluster secret");
    }
    return { name: `node ${nodeId ?? "(unnamed)"}`, roles: NODE_ROLES, via: "cluster secret", scope: undefined };
  }
}

const CLUSTER_AUTHORIZATION = new RegExp(`^${CLUSTER_SCHEME}\\s+(\\S+)$`, "i");
const NODE_ROLES: ReadonlySet<Role> = new Set(["node"]);

const identities = new WeakMap<object, Identity>();

/**
 * The identity the guard established for `call` (services read it; OPEN_IDENTITY for a call
 * that was not guarded). A part of a split call (forwarder.ts) is made with
 * `Object.create(call)`, so the lookup walks the prototype chain to the guarded call.
 */
export function identityOf(call: object): Identity {
  for (let at: object | null = call; at !== null; at = Object.getPrototypeOf(at) as object | null) {
    const identity = identities.get(at);
    if (identity) return identity;
  }
  return OPEN_IDENTITY;
}

export const setIdentity = (call: object, identity: Identity): void => {
  identities.set(call, identity);
};
