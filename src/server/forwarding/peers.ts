/**
 * gRPC channels to the other members, one per advertised address, for forwarded calls.
 * A forwarded call is the caller's own request message, sent as it came (same service,
 * same method) with the route this node computed. Every call presents this node's
 * cluster credential (`authorization: Cluster <secret>`, security/cluster-secret.ts) and,
 * when it is forwarded for a caller, the identity this node's guard established for that
 * caller (security/on-behalf-of.ts), never the caller's own token: the owner authorises
 * and scopes the caller exactly as if it had been called directly, and a caller known
 * only by its client certificate is known there too. Answers come back as protobuf-es messages; errors as the owner's
 * ConveyorError (its reason and details intact), which the forwarder passes on as they are.
 */
import * as grpc from "@grpc/grpc-js";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { ConveyorError } from "../../base/errors.js";
import { CHANNEL_OPTIONS } from "../../rpc/client.js";
import { toGrpcDefinition } from "../../rpc/service-definition.js";
import { fromServiceError } from "../../rpc/status.js";

import { CLUSTER_SCHEME } from "../security/cluster-secret.js";
import { FORWARDED_BY, ON_BEHALF_OF } from "../security/on-behalf-of.js";

/** Metadata keys of a forwarded call. */
export { FORWARDED_BY };
/** `<partition>:<epoch>:<ring version>` the forwarder routed with (epoch 0: not claimed yet). */
export const FORWARD_ROUTE = "conveyor-route";

export interface ForwardOptions {
  /** The caller's identity, encoded (on-behalf-of.ts); undefined for the node's own calls (a handoff). */
  onBehalfOf?: string | undefined;
  /** Who forwards, and the route it used. */
  from: string;
  route: string;
  deadlineMs: number;
}

/** How grpc-js fails a call it did not send: its channel has no connection (it is backing off after a failed one). */
const NOT_CONNECTED = "No connection established";

/** A call refused by this node's own channel, never sent: safe to send again. */
class NotConnected extends Error {
  constructor(readonly error: ConveyorError) {
    super(error.message);
  }
}

export class Peers {
  private readonly clients = new Map<string, grpc.Client>();
  private readonly definitions = new Map<DescService, grpc.ServiceDefinition>();

  constructor(
    /** The cluster secret this node presents (read per call: a reload takes effect at once); undefined: none configured. */
    private readonly clusterSecret: () => string | undefined = () => undefined,
    private readonly credentials: () => grpc.ChannelCredentials = () => grpc.credentials.createInsecure(),
  ) {}

  /**
   * Sends `request` to `method` of `service` on the node at `address`.
   *
   * A channel that failed to connect (the peer was down) waits out grpc's reconnect
   * backoff and fails every call at once meanwhile, without trying ("No connection
   * established"), even after the peer is back: such a call never left this node, so it
   * is sent once more on a fresh channel, which connects at once.
   */
  async call(address: string, service: DescService, method: DescMethod, request: unknown, options: ForwardOptions): Promise<unknown> {
    try {
      return await this.callOnce(address, service, method, request, options);
    } catch (error) {
      if (!(error instanceof NotConnected)) throw error;
      this.drop(address);
      try {
        return await this.callOnce(address, service, method, request, options);
      } catch (again) {
        throw again instanceof NotConnected ? again.error : again;
      }
    }
  }

  private callOnce(address: string, service: DescService, method: DescMethod, request: unknown, options: ForwardOptions): Promise<unknown> {
    const client = this.client(address);
    const metadata = new grpc.Metadata();
    const secret = this.clusterSecret();
    if (secret !== undefined) metadata.set("authorization", `${CLUSTER_SCHEME} ${secret}`);
    if (options.onBehalfOf !== undefined) metadata.set(ON_BEHALF_OF, options.onBehalfOf);
    metadata.set(FORWARDED_BY, options.from);
    metadata.set(FORWARD_ROUTE, options.route);
    // The same path and (de)serializers as every client and the server (service-definition.ts).
    const definition = this.definitionOf(service)[method.localName]!;
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        definition.path, definition.requestSerialize, definition.responseDeserialize,
        request, metadata, { deadline: options.deadlineMs },
        (err, response) => {
          if (!err) resolve(response);
          else if (err.code === grpc.status.UNAVAILABLE && !err.metadata?.get("grpc-status-details-bin").length) {
            // A transport failure, not an answer of the peer's: name the peer.
            const error = new ConveyorError("UNAVAILABLE", "UNREACHABLE", `the node at ${address} that owns this call's queue is unreachable: ${err.details}`);
            reject(err.details.startsWith(NOT_CONNECTED) ? new NotConnected(error) : error);
          } else if (err.code === grpc.status.UNAUTHENTICATED) {
            // The peer refused this node's credential, not the caller's (the caller was
            // authenticated here): a cluster misconfiguration, never the caller's to fix.
            reject(new ConveyorError("UNAVAILABLE", "UNREACHABLE",
              `the node at ${address} refused this node's cluster credential (${err.details}); every node needs the same cluster_secret_file`));
          } else {
            reject(fromServiceError(err));
          }
        });
    });
  }

  /** Closes channels to addresses no member advertises any more. */
  retain(addresses: ReadonlySet<string>): void {
    for (const [address, client] of this.clients) {
      if (!addresses.has(address)) {
        client.close();
        this.clients.delete(address);
      }
    }
  }

  private drop(address: string): void {
    this.clients.get(address)?.close();
    this.clients.delete(address);
  }

  close(): void {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }

  private definitionOf(service: DescService): grpc.ServiceDefinition {
    let definition = this.definitions.get(service);
    if (!definition) this.definitions.set(service, (definition = toGrpcDefinition(service)));
    return definition;
  }

  private client(address: string): grpc.Client {
    let client = this.clients.get(address);
    if (!client) {
      client = new grpc.Client(address, this.credentials(), CHANNEL_OPTIONS);
      this.clients.set(address, client);
    }
    return client;
  }
}

