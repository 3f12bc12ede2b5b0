/**
 * The original caller's identity on a forwarded call. The node that received the call
 * authenticated the caller (token or client certificate) in its guard; it sends on the
 * identity it established, not the caller's credential, because a client certificate
 * cannot travel and because the owner must apply the *same* roles and queue scope.
 *
 * The owner trusts this metadata only from a caller its guard identified as a node
 * (identity.ts): from anyone else it is refused, never read.
 * Encoded as base64url JSON: gRPC metadata values are ASCII and names in the auth file
 * need not be.
 */
import { ConveyorError } from "../../base/errors.js";
import { AUTHORIZATION_MAX_CHARS } from "../../base/limits.js";
import type { Identity } from "./identity.js";
import { queueScopeOf } from "./queue-scope.js";
import { isRole, type Role } from "./roles.js";

/** Metadata key naming the node that sent a node-to-node call (names it in logs; the credential proves it is a node). */
export const FORWARDED_BY = "conveyor-forwarded-by";
/** Metadata key of the original caller's identity on a forwarded call. */
export const ON_BEHALF_OF = "conveyor-on-behalf-of";

interface Wire {
  name: string;
  roles: string[];
  via: string;
  queues?: string[];
}

export function encodeOnBehalfOf(identity: Identity): string {
  const wire: Wire = {
    name: identity.name, roles: [...identity.roles], via: identity.via,
    ...(identity.scope ? { queues: [...identity.scope.patterns] } : {}),
  };
  return Buffer.from(JSON.stringify(wire), "utf8").toString("base64url");
}

/** The caller a node forwarded for; throws PERMISSION_DENIED for a value no node of ours would send. */
export function decodeOnBehalfOf(value: string, node: string): Identity {
  const refuse = (why: string) =>
    new ConveyorError("PERMISSION_DENIED", "FORWARDED_IDENTITY_REFUSED", `the caller identity ${node} forwarded is not usable: ${why}`);
  // A scope of many patterns is long, but not unbounded.
  if (value.length > AUTHORIZATION_MAX_CHARS * 16) throw refuse("it is too long");
  let wire: Wire;
  try {
    wire = JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as Wire;
  } catch {
    throw refuse("it is not base64url JSON");
  }
  if (typeof wire !== "object" || wire === null || typeof wire.name !== "string" || wire.name === "") throw refuse("it has no name");
  // A forwarding node with auth off would vouch for anyone: refused, not trusted.
  if (wire.via !== "token" && wire.via !== "certificate") throw refuse(`it was established by ${JSON.stringify(wire.via)}, not a token or certificate (is authentication off on ${node}?)`);
  if (!Array.isArray(wire.roles) || wire.roles.length === 0 || !wire.roles.every(isRole)) throw refuse("its roles are not known roles");
  // Forwarding for a node is not a thing nodes do; a node's power must not pass through another.
  if (wire.roles.includes("node")) throw refuse("a node's identity is never forwarded");
  let scope;
  try {
    scope = queueScopeOf(wire.queues, "its queues");
  } catch (e) {
    throw refuse((e as Error).message);
  }
  return { name: wire.name, roles: new Set(wire.roles as Role[]), via: wire.via, scope, forwardedBy: node };
}
