/**
 * The grpc-js ↔ protobuf-es adapter. protoc-gen-es emits service descriptors but no
 * grpc-js definitions, so one loop over a descriptor's methods builds the
 * `ServiceDefinition` that both the server (`addService`) and clients
 * (`makeGenericClientConstructor`) use. No proto-loader, no protobufjs at runtime.
 */
import * as grpc from "@grpc/grpc-js";
import { create, toBinary, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { decodeMessage } from "./fast-decode.js";
import { fastEncoderFor } from "./fast-encode.js";

/** A Buffer over the encoded bytes, not a copy of them. */
const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/**
 * The hot responses have hand encoders (fast-encode.ts, which take the handler's init
 * shape as it is); everything else goes through reflection, after `create()` turns an
 * init shape into a message (it returns a real message unchanged).
 */
const serialize = (schema: DescMessage): ((message: unknown) => Buffer) => {
  const fast = fastEncoderFor(schema);
  if (fast) return (message) => asBuffer(fast(message));
  return (message) => asBuffer(toBinary(schema, create(schema, message as never)));
};
/** By hand for the few messages fast-decode.ts knows (a Lease answer), else protobuf-es. */
const deserialize = (schema: DescMessage) => (bytes: Buffer) => decodeMessage(schema, bytes);

/**
 * `decodeRequest` replaces the request deserializer (the server's never throws, see
 * request-decode.ts); clients keep the plain one.
 */
export function toGrpcDefinition(
  service: DescService,
  decodeRequest?: (schema: DescMessage, bytes: Buffer) => unknown,
): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const m of service.methods as DescMethod[]) {
    const kind = m.methodKind;
    definition[m.localName] = {
      path: `/${service.typeName}/${m.name}`,
      originalName: m.name,
      requestStream: kind === "client_streaming" || kind === "bidi_streaming",
      responseStream: kind === "server_streaming" || kind === "bidi_streaming",
      requestSerialize: serialize(m.input),
      requestDeserialize: decodeRequest ? (bytes: Buffer) => decodeRequest(m.input, bytes) : deserialize(m.input),
      responseSerialize: serialize(m.output),
      responseDeserialize: deserialize(m.output),
    };
  }
  return definition;
}

type Methods<S> = S extends GenService<infer M> ? M : never;
type In<M> = M extends { input: infer I extends DescMessage } ? I : never;
type Out<M> = M extends { output: infer O extends DescMessage } ? O : never;

/** Server handlers for a unary-only service, typed from its descriptor. */
export type UnaryImpl<S extends GenService<GenServiceMethods>> = {
  [K in keyof Methods<S>]: (
    call: grpc.ServerUnaryCall<MessageShape<In<Methods<S>[K]>>, MessageShape<Out<Methods<S>[K]>>>,
  ) => Promise<MessageInitShape<Out<Methods<S>[K]>>>;
};

/** A typed promise client for a unary-only service. */
export type UnaryClient<S extends GenService<GenServiceMethods>> = {
  [K in keyof Methods<S>]: (
    request: MessageInitShape<In<Methods<S>[K]>>,
    options?: CallOptions,
  ) => Promise<MessageShape<Out<Methods<S>[K]>>>;
};

export interface CallOptions {
  /** Call deadline, relative. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /**
   * Wait (until the deadline) for the server to become reachable instead of failing at
   * once with UNAVAILABLE: right for SDK calls across a node restart, wrong for a CLI.
   */
  waitForReady?: boolean;
  /**
   * With waitForReady: how long to wait for a connection before failing with
   * UNREACHABLE "node unreachable at ADDR" (the call's own deadline then starts once
   * connected). Without it the connection wait counts against the deadline.
   */
  connectTimeoutMs?: number;
  /**
   * Makes the call a standing one when it goes on a session (a Lease with `standing`):
   * see StandingCall. A call sent unary (no session open) answers once, as it always did.
   */
  standing?: StandingCall;
}

/** The caller's side of a standing call on a session (session-client.ts). */
export interface StandingCall {
  /** The call went on a session: `grant(n)` sends it n credits while it runs. */
  attached(grant: (credits: number) => void): void;
  /** One answer of the call that goes on (decoded); its deadline starts again. */
  answered(response: unknown): void;
}
