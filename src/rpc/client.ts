import * as grpc from "@grpc/grpc-js";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { DescMethod } from "@bufbuild/protobuf";
import { toGrpcDefinition, type CallOptions, type UnaryClient } from "./service-definition.js";
import { fromServiceError } from "./status.js";
import { GRPC_MESSAGE_MAX_BYTES, RECONNECT_BACKOFF_INITIAL_MS, RECONNECT_BACKOFF_MAX_MS } from "../base/limits.js";
import { ConveyorError } from "../base/errors.js";
import { SessionClient } from "./session-client.js";

/**
 * Where a node listens for gRPC unless told otherwise (`listen`), and so where the SDK and
 * the CLI dial unless told otherwise (`address`, `--server`, $CONVEYOR_SERVER).
 */
export const DEFAULT_ADDRESS = "127.0.0.1:7233";

/** The variable naming the node the SDK and the CLI dial. */
export const SERVER_ENV_VAR = "CONVEYOR_SERVER";

/** Every environment variable the clients (SDK, CLI) read; conveyord warns of CONVEYOR_* variables outside its own settings and these. */
export const CLIENT_ENV_VARS: readonly string[] = [
  SERVER_ENV_VAR,
  // Security (sdk/connection-security.ts, cli/context.ts).
  "CONVEYOR_TOKEN", "CONVEYOR_TLS_CA", "CONVEYOR_TLS_CERT", "CONVEYOR_TLS_KEY",
];

export interface ChannelConfig {
  /** host:port */
  address: string;
  credentials?: grpc.ChannelCredentials;
  /** Sent on every call as `authorization: Bearer <token>` (per call, so it works on plaintext loopback channels too). */
  token?: string;
}

/**
 * Client keepalive: notice a dead server in seconds, even on an idle channel. Reconnect
 * backoff capped: a node back after a long outage is found again within about
 * RECONNECT_BACKOFF_MAX_MS (grpc-js would otherwise wait up to 120 s between attempts).
 */
export const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": RECONNECT_BACKOFF_INITIAL_MS,
  "grpc.max_reconnect_backoff_ms": RECONNECT_BACKOFF_MAX_MS,
  "grpc.keepalive_time_ms": 10_000,
  "grpc.keepalive_timeout_ms": 5_000,
  "grpc.keepalive_permit_without_calls": 1,
  "grpc.max_receive_message_length": GRPC_MESSAGE_MAX_BYTES,
  "grpc.max_send_message_length": GRPC_MESSAGE_MAX_BYTES,
};

/** One gRPC channel shared by several typed service clients. */
export class RpcChannel {
  private readonly clients: grpc.Client[] = [];
  private sessionClient: SessionClient | undefined;
  constructor(private readonly config: ChannelConfig) {}

  get address(): string {
    return this.config.address;
  }

  /**
   * Resolves true once the channel is connected, false when `timeoutMs` passes (or
   * `signal` aborts) first. Starts connecting if the channel is idle.
   */
  waitReady(timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    const client = this.clients[0];
    if (!client) throw new Error("RpcChannel.waitReady: create a service client first");
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const onAbort = () => resolve(false);
      signal?.addEventListener("abort", onAbort, { once: true });
      client.waitForReady(Date.now() + timeoutMs, (err) => {
        signal?.removeEventListener("abort", onAbort);
        resolve(!err);
      });
    });
  }

  /** The error of a call that found no connection within `waitedMs`. */
  unreachable(waitedMs: number): ConveyorError {
    return new ConveyorError("UNAVAILABLE", "UNREACHABLE",
      `node unreachable at ${this.config.address}: no connection within ${waitedMs} ms`);
  }

  /**
   * A promise-based client; errors reject as ConveyorError. With `session`, its calls go on
   * the channel's session stream whenever one is open (session-client.ts): the same calls
   * at a fraction of a unary call's cost. The SDK's hot clients (tasks, workers) use it.
   */
  service<S extends GenService<GenServiceMethods>>(service: S, options: { session?: boolean } = {}): UnaryClient<S> {
    const definition = toGrpcDefinition(service);
    const Ctor = grpc.makeGenericClientConstructor(definition, service.typeName);
    const first = this.clients[0];
    const raw = new Ctor(this.config.address, this.config.credentials ?? grpc.credentials.createInsecure(), {
      ...CHANNEL_OPTIONS,
      ...(first ? { channelOverride: first.getChannel() } : {}),
    }) as unknown as Record<string, Function>;
    this.clients.push(raw as unknown as grpc.Client);
    const typed: Record<string, unknown> = {};
    for (const m of service.methods as DescMethod[]) {
      const method = raw[m.localName]!.bind(raw);
      const send = (request: unknown, options: CallOptions) =>
        new Promise((resolve, reject) => {
          // Cancelled before it started (an abort event that already fired never fires again).
          if (options.signal?.aborted) {
            reject(new ConveyorError("UNAVAILABLE", "UNREACHABLE", "call cancelled"));
            return;
          }
          const callOptions: grpc.CallOptions = options.timeoutMs ? { deadline: Date.now() + options.timeoutMs } : {};
          const metadata = new grpc.Metadata();
          if (options.waitForReady) metadata.setOptions({ waitForReady: true });
          if (this.config.token) metadata.set("authorization", `Bearer ${this.config.token}`);
          const { signal } = options;
          const onAbort = () => call.cancel();
          const call = method(request, metadata, callOptions, (err: grpc.ServiceError | null, res: unknown) => {
            signal?.removeEventListener("abort", onAbort);
            if (err) reject(fromServiceError(err));
            else resolve(res);
          });
          signal?.addEventListener("abort", onAbort, { once: true });
        });
      typed[m.localName] = async (request: unknown, options: CallOptions = {}) => {
        const wait = options.connectTimeoutMs;
        if (options.waitForReady && wait !== undefined && !(await this.waitReady(wait, options.signal))) {
          if (options.signal?.aborted) throw new ConveyorError("UNAVAILABLE", "UNREACHABLE", "call cancelled");
          if (!this.config.credentials) throw this.unreachable(wait);
          // grpc-js keeps a failed TLS handshake's cause from a readiness wait; one attempt
          // that does not wait reports it ("certificate not trusted"). Nothing was sent yet,
          // so this attempt is the call's only one.
          try {
            return await send(request, { ...options, waitForReady: false });
          } catch (error) {
            if (error instanceof ConveyorError && error.reason === "UNREACHABLE") throw this.unreachable(wait);
            throw error;
          }
        }
        return send(request, options);
      };
    }
    if (options.session) {
      const session = this.session();
      for (const m of service.methods as DescMethod[]) {
        const unary = typed[m.localName] as (request: unknown, options: CallOptions) => Promise<unknown>;
        const path = `${service.typeName}/${m.name}`;
        const encode = definition[m.localName]!.requestSerialize as (message: unknown) => Buffer;
        typed[m.localName] = (request: unknown, callOptions: CallOptions = {}) => session.call(path, request, encode, m.output, callOptions, unary);
      }
    }
    return typed as UnaryClient<S>;
  }

  /** The channel's one session (opened by its first call). */
  private session(): SessionClient {
    if (!this.sessionClient) {
      const first = this.clients[0];
      if (!first) throw new Error("RpcChannel.session: create a service client first");
      this.sessionClient = new SessionClient(first.getChannel(), this.config.address, this.config.credentials ?? grpc.credentials.createInsecure(), CHANNEL_OPTIONS, this.config.token);
    }
    return this.sessionClient;
  }

  close(): void {
    this.sessionClient?.close();
    for (const c of this.clients) c.close();
  }
}
