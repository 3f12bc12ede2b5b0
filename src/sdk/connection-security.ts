/**
 * What the SDK sends to prove who it is: the bearer token (option `token`, else
 * $CONVEYOR_TOKEN). The node answers a missing or unknown token with UNAUTHENTICATED and
 * a missing role with PERMISSION_DENIED, in words that name the fix; the SDK passes them
 * on as ConveyorErrors unchanged.
 */
import type { ChannelConfig } from "../rpc/client.js";

export interface ConnectionSecurityOptions {
  /** Bearer token for a node with an auth file; default $CONVEYOR_TOKEN. Never logged. */
  token?: string;
}

export function channelSecurity(options: ConnectionSecurityOptions): Pick<ChannelConfig, "token"> {
  const token = options.token ?? process.env.CONVEYOR_TOKEN;
  if (token !== undefined && token.trim() === "") throw new Error("token: empty (leave it unset for a node without authentication)");
  return token === undefined ? {} : { token: token.trim() };
}
