/**
 * How the SDK's classes (Client, Worker, Admin) reach a node: the options they share and
 * the one place that turns them into a channel, with its token and TLS settings
 * (connection-security.ts), so every class gets them at once.
 */
import { CONNECT_TIMEOUT_MS_DEFAULT } from "../base/limits.js";
import { DEFAULT_ADDRESS, RpcChannel } from "../rpc/client.js";
import { channelSecurity, type ConnectionSecurityOptions } from "./connection-security.js";

export interface ConnectionOptions extends ConnectionSecurityOptions {
  /** host:port; default $CONVEYOR_SERVER or 127.0.0.1:7233. */
  address?: string;
  /**
   * How long a call waits for an unreachable node before failing with UNREACHABLE
   * ("node unreachable at ADDR"); default 10 s. (A Worker waits for its node forever.)
   */
  connectTimeoutMs?: number;
}

export const defaultAddress = () => process.env.CONVEYOR_SERVER || DEFAULT_ADDRESS;

/** The resolved connection settings and the channel they open. */
export interface Connection {
  channel: RpcChannel;
  address: string;
  connectTimeoutMs: number;
}

export function connectTo(options: ConnectionOptions, who: string): Connection {
  const address = options.address ?? defaultAddress();
  const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS_DEFAULT;
  if (!Number.isFinite(connectTimeoutMs) || connectTimeoutMs <= 0) {
    throw new Error(`${who}: connectTimeoutMs must be a positive number of milliseconds (got ${String(options.connectTimeoutMs)})`);
  }
  return { channel: new RpcChannel({ address, ...channelSecurity(options) }), address, connectTimeoutMs };
}
