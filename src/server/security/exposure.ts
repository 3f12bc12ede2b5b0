/**
 * Fail closed: a node whose gRPC or HTTP address is reachable from other machines
 * refuses to start without authentication, unless the operator says, by a flag named
 * for what it does, that an open network port is intended (a private network, a proxy
 * that authenticates).
 */
import { isIP } from "node:net";

export const INSECURE_FLAG = "--insecure-allow-unauthenticated-network";

/** The host part of host:port, without IPv6 brackets. */
export function hostOf(address: string): string {
  const i = address.lastIndexOf(":");
  const host = i < 0 ? address : address.slice(0, i);
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/** Only addresses that cannot be reached from another machine: 127.0.0.0/8, ::1, localhost. 0.0.0.0 and :: are every interface. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  if (h === "localhost" || h === "::1") return true;
  return isIP(h) === 4 && h.startsWith("127.");
}

/**
 * The refusal message for a start that would expose unauthenticated ports, or undefined
 * when the start may go ahead.
 */
export function exposureRefusal(addresses: { grpc: string; http: string }, authEnabled: boolean, allowInsecure: boolean): string | undefined {
  if (authEnabled || allowInsecure) return undefined;
  const open = Object.entries(addresses).filter(([, a]) => !isLoopback(hostOf(a)));
  if (open.length === 0) return undefined;
  return `refusing to start: ${open.map(([port, a]) => `${port} listens on ${a}`).join(" and ")}, which other machines can reach, ` +
    `and no authentication is configured. Set auth_file (see docs/security.md), listen on 127.0.0.1, ` +
    `or pass ${INSECURE_FLAG} if anyone who can reach these ports may do anything`;
}
