import * as grpc from "@grpc/grpc-js";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { DescMethod } from "@bufbuild/protobuf";
import { toGrpcDefinition, type CallOptions, type UnaryClient } from "./service-definition.js";
import { fromServiceError } from "./status.js";
import { GRPC_MESSAGE_MAX_BYTES } from "../base/limits.js";

/**
 * Where a node listens for gRPC unless told otherwise (`listen`), and so where the SDK and
 * the CLI dial unless told otherwise (`address`, `--server`, $CONVEYOR_SERVER).
 */
export const DEFAULT_ADDRESS = "127.0.0.1:7233";

export interface ChannelConfig {
  /** host:port */
  address: string;
  credentials?: grpc.ChannelCredentials;
  /** Sent on every call as `authorization: Bearer <token>` (per call, so it works on plaintext loopback channels too). */
  token?: string;
}

/** Client keepalive: notice a dead server in seconds, even on an idle channel. */
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.keepalive_time_ms": 10_000,
  "grpc.keepalive_timeout_ms": 5_000,
  "grpc.keepalive_permit_without_calls": 1,
  "grpc.max_receive_message_length": GRPC_MESSAGE_MAX_BYTES,
  "grpc.max_send_message_length": GRPC_MESSAGE_MAX_BYTES,
};

/** One gRPC channel shared by several typed service clients. */
export class RpcChannel {
  private readonly clients: grpc.Client[] = [];
  constructor(private readonly config: ChannelConfig) {}

  /** A promise-based client; errors reject as ConveyorError. */
  service<S extends GenService<GenServiceMethods>>(service: S): UnaryClient<S> {
    const Ctor = grpc.makeGenericClientConstructor(toGrpcDefinition(service), service.typeName);
    const first = this.clients[0];
    const raw = new Ctor(this.config.address, this.config.credentials ?? grpc.credentials.createInsecure(), {
      ...CHANNEL_OPTIONS,
      ...(first ? { channelOverride: first.getChannel() } : {}),
    }) as unknown as Record<string, Function>;
    this.clients.push(raw as unknown as grpc.Client);
    const typed: Record<string, unknown> = {};
    for (const m of service.methods as DescMethod[]) {
      const method = raw[m.localName]!.bind(raw);
      typed[m.localName] = (request: unknown, options: CallOptions = {}) =>
        new Promise((resolve, reject) => {
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
    }
    return typed as UnaryClient<S>;
  }

  close(): void {
    for (const c of this.clients) c.close();
  }
}
