/**
 * What the SDK (and the CLI) send to prove who they are and to check whom they talk to:
 * the bearer token (option `token`, else $CONVEYOR_TOKEN) and TLS (option `tls`: the CA
 * that signed the node's certificate, and for mTLS the client's certificate and key).
 * The node answers a missing or unknown token with UNAUTHENTICATED and a missing role
 * with PERMISSION_DENIED in words that name the fix; TLS failures are worded by
 * rpc/tls-errors.ts ("certificate not trusted", "host name does not match").
 */
import type { ChannelConfig } from "../rpc/client.js";
import { clientTlsCredentials } from "../rpc/channel-tls.js";

export interface TlsOptions {
  /** PEM of the CA(s) that signed the node's certificate; default the system's roots. */
  ca?: string | Buffer;
  /** PEM of this client's certificate and key, for a node that requires them (mTLS). */
  cert?: string | Buffer;
  key?: string | Buffer;
}

export interface ConnectionSecurityOptions {
  /** Bearer token for a node with an auth file; default $CONVEYOR_TOKEN. Never logged. */
  token?: string;
  /** Connect with TLS: `true` trusts the system's roots; an object names the CA and the client certificate. */
  tls?: boolean | TlsOptions;
}

const pem = (value: string | Buffer | undefined): Buffer | undefined => (value === undefined ? undefined : Buffer.from(value));

export function channelSecurity(options: ConnectionSecurityOptions): Pick<ChannelConfig, "token" | "credentials"> {
  const token = options.token ?? process.env.CONVEYOR_TOKEN;
  if (token !== undefined && token.trim() === "") throw new Error("token: empty (leave it unset for a node without authentication)");
  const out: Pick<ChannelConfig, "token" | "credentials"> = token === undefined ? {} : { token: token.trim() };
  if (!options.tls) return out;
  const tls = options.tls === true ? {} : options.tls;
  if ((tls.cert === undefined) !== (tls.key === undefined)) throw new Error("tls: give both cert and key (the client certificate and its private key), or neither");
  out.credentials = clientTlsCredentials({ ca: pem(tls.ca), cert: pem(tls.cert), key: pem(tls.key) });
  return out;
}
