/**
 * SessionService on the server: unary calls of the given services carried on one stream
 * (proto/conveyor/v1/session_service.proto). Each call runs the very handler its unary
 * method runs (guarded, forwarded: the same object addUnaryService registers), with a
 * call object shaped like grpc-js's unary one: the stream's metadata, peer and TLS
 * context, the call's own request, deadline and cancellation. So a session changes the
 * cost of a call, never its meaning.
 *
 * What a session must not do is let one call hurt the others on it: a request that does
 * not decode, names no method or fails is answered alone; an answer larger than a client
 * may receive (a bug: answers are bounded far below it) is answered INTERNAL, and logged,
 * instead of ending the stream. Only a frame that does not decode at all (no call id to
 * answer) ends the stream, with INVALID_ARGUMENT.
 *
 * Stopping (`close`): every session stops taking calls at once (frames that come after
 * are never run), answers the calls it runs and then ends with OK. A client knows from
 * that OK that every call it got no answer to was never run, and sends those again
 * (as unary calls, which a stopping node refuses or serves as it would any call).
 */
import * as grpc from "@grpc/grpc-js";
import { toBinary, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { ConveyorError, invalidField } from "../base/errors.js";
import { GRPC_MESSAGE_MAX_BYTES } from "../base/limits.js";
import { StatusSchema } from "../gen/google/rpc/status_pb.js";
import { SessionRequestSchema, type SessionRequest } from "../gen/conveyor/v1/session_service_pb.js";
import { toGrpcDefinition } from "./service-definition.js";
import { decodeRequest, UndecodableRequest } from "./request-decode.js";
import { toStatus } from "./status.js";
import { encodeSessionAnswer, sessionDefinition } from "./session-frames.js";

/** An answer over this is refused (RESOURCE_EXHAUSTED): a client would end the whole stream on it. */
const ANSWER_MAX_BYTES = GRPC_MESSAGE_MAX_BYTES - 1024;

type Handler = (call: unknown) => Promise<unknown>;

interface SessionMethod {
  /** The impl's key, which metrics and logs name (as addUnaryService does). */
  name: string;
  input: DescMethod["input"];
  handler: Handler;
  serialize: (message: unknown) => Buffer;
}

export interface SessionServiceDeps {
  onInternal: (method: string, error: unknown) => void;
  observe?: (method: string, code: grpc.status, seconds: number) => void;
  /** Counts the calls that came on sessions (each is observed as its unary method too). */
  carried?: () => void;
}

/** The node's open sessions; `close` ends them as the header says. */
export interface Sessions {
  readonly open: number;
  close(): Promise<void>;
}

/**
 * Registers SessionService on `server`, carrying calls to every unary method of the
 * given services (each with its implementation, as given to addUnaryService).
 */
export function addSessionService(
  server: grpc.Server,
  services: ReadonlyArray<{ service: DescService; impl: object }>,
  deps: SessionServiceDeps,
): Sessions {
  const methods = new Map<string, SessionMethod>();
  for (const { service, impl } of services) {
    const definition = toGrpcDefinition(service);
    const handlers = impl as Record<string, Handler>;
    for (const m of service.methods as DescMethod[]) {
      if (m.methodKind !== "unary") continue;
      const handler = handlers[m.localName];
      if (!handler) continue;
      methods.set(`${service.typeName}/${m.name}`, {
        name: m.localName, input: m.input, handler: handler.bind(impl), serialize: definition[m.localName]!.responseSerialize as (message: unknown) => Buffer,
      });
    }
  }
  const open = new Set<ServerSession>();
  let closing = false;
  // Frames decode as requests do (request-decode.ts): never throwing, which would end the stream INTERNAL.
  server.addService(sessionDefinition({ request: (bytes) => decodeRequest(SessionRequestSchema, bytes) }), {
    session: (stream: grpc.ServerDuplexStream<unknown, Buffer>) => {
      const session = new ServerSession(stream, methods, deps, () => open.delete(session));
      open.add(session);
      if (closing) session.close();
    },
  });
  return {
    get open() {
      return open.size;
    },
    async close() {
      closing = true;
      await Promise.all([...open].map((s) => s.close()));
    },
  };
}

/** What answers a call: its status code, and the frame's response or error bytes. */
interface AnswerBody {
  code: grpc.status;
  frame: [Uint8Array | undefined, Uint8Array | undefined];
}

/** One call in flight on a session. */
interface RunningCall {
  cancelled: boolean;
  cancel(): void;
  /** Credits the client granted a standing call (SessionRequest.credits). */
  grant(credits: number): void;
}

class ServerSession {
  private readonly running = new Map<bigint, RunningCall>();
  private closing = false;
  private ended = false;
  private drained: (() => void) | undefined;

  constructor(
    private readonly stream: grpc.ServerDuplexStream<unknown, Buffer>,
    private readonly methods: ReadonlyMap<string, SessionMethod>,
    private readonly deps: SessionServiceDeps,
    private readonly onEnd: () => void,
  ) {
    // Headers at once: the client takes the session as open when they arrive.
    stream.sendMetadata(new grpc.Metadata());
    stream.on("data", (frame: unknown) => this.frame(frame));
    // The client half-closed: answer what runs, then end.
    stream.on("end", () => void this.close());
    // The client went away (or the stream broke): nobody is left to answer.
    stream.on("cancelled", () => this.abandon());
    stream.on("error", () => this.abandon());
  }

  /** Takes no more calls; resolves once the ones running are answered and the stream ended. */
  close(): Promise<void> {
    this.closing = true;
    if (this.running.size === 0) {
      this.end();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const previous = this.drained;
      this.drained = () => {
        previous?.();
        resolve();
      };
    });
  }

  private frame(frame: unknown): void {
    if (this.ended) return;
    if (frame instanceof UndecodableRequest) {
      this.abandon();
      this.stream.emit("error", { code: grpc.status.INVALID_ARGUMENT, details: frame.error.message });
      return;
    }
    const call = frame as SessionRequest;
    if (call.cancel) {
      this.running.get(call.callId)?.cancel();
      return;
    }
    if (call.credits > 0) {
      this.running.get(call.callId)?.grant(call.credits);
      return;
    }
    // Closing: a call that comes now is never run (the client sends it again, see the header).
    if (!this.closing) this.run(call);
  }

  private run(frame: SessionRequest): void {
    const started = performance.now();
    this.deps.carried?.();
    const id = frame.callId;
    const method = this.methods.get(frame.method);
    if (!method) {
      this.answerError(id, invalidField("method", `no such unary method on a session: ${JSON.stringify(frame.method.slice(0, 200))}`));
      return;
    }
    const listeners: Array<() => void> = [];
    const creditListeners: Array<(credits: number) => void> = [];
    let deadline = frame.timeoutMs > 0 ? new Date(Date.now() + frame.timeoutMs) : Infinity;
    const state: RunningCall = {
      cancelled: false,
      cancel: () => {
        if (state.cancelled) return;
        state.cancelled = true;
        for (const listener of listeners) listener();
      },
      grant: (credits) => {
        for (const listener of creditListeners) listener(credits);
      },
    };
    if (this.running.has(id)) {
      this.answerError(id, invalidField("call_id", `call ${id} is already in flight on this session`));
      return;
    }
    this.running.set(id, state);
    let timer = frame.timeoutMs > 0 ? setTimeout(() => state.cancel(), frame.timeoutMs) : undefined;
    const stream = this.stream;
    const request = decodeRequest(method.input, frame.request);
    // The shape of a grpc-js unary call that the handlers read (see rpc/server.ts, guard.ts),
    // and what a standing call adds: `answerMore` sends one of its answers (its deadline
    // starts again), the "credits" event says the client granted more.
    const unaryCall = {
      request,
      metadata: stream.metadata,
      get cancelled() {
        return state.cancelled;
      },
      on(event: string, listener: (...args: never[]) => void) {
        if (event === "cancelled") listeners.push(listener as () => void);
        if (event === "credits") creditListeners.push(listener as (credits: number) => void);
        return unaryCall;
      },
      answerMore: (response: unknown) => {
        if (state.cancelled) return;
        const { code, frame: body } = this.encodeAnswer(method, response);
        if (code !== grpc.status.OK) throw new Error(`an answer of the standing ${method.name} could not be encoded`);
        this.write(encodeSessionAnswer(id, body[0], undefined, true));
        if (timer) {
          clearTimeout(timer);
          timer = setTimeout(() => state.cancel(), frame.timeoutMs);
          deadline = new Date(Date.now() + frame.timeoutMs);
        }
      },
      getPeer: () => stream.getPeer(),
      getDeadline: () => deadline,
      getAuthContext: () => stream.getAuthContext(),
    };
    const result = request instanceof UndecodableRequest ? Promise.reject(request.error) : Promise.resolve().then(() => method.handler(unaryCall));
    result.then((response) => this.encodeAnswer(method, response), (error: unknown) => this.errorAnswer(method, error)).then(({ code, frame }) => {
      // A cancelled call's caller is gone (as with a cancelled unary call, nothing is sent).
      if (!state.cancelled) this.write(encodeSessionAnswer(id, ...frame));
      this.deps.observe?.(method.name, code, (performance.now() - started) / 1000);
      // Last: finishing the last call of a closing session ends its stream.
      this.finish(id, timer);
    });
  }

  /** The answer frame's body of a handler's response (an encoding failure or an oversized answer is INTERNAL). */
  private encodeAnswer(method: SessionMethod, response: unknown): AnswerBody {
    try {
      const bytes = method.serialize(response);
      if (bytes.byteLength <= ANSWER_MAX_BYTES) return { code: grpc.status.OK, frame: [bytes, undefined] };
      throw new Error(`the answer of ${method.name} is ${bytes.byteLength} bytes, over the ${ANSWER_MAX_BYTES} a client receives`);
    } catch (error) {
      return this.errorAnswer(method, error);
    }
  }

  /** The answer frame's body of a failed call; anything but a ConveyorError is INTERNAL, logged and never sent. */
  private errorAnswer(method: SessionMethod, error: unknown): AnswerBody {
    const status = toStatus(error);
    if (status.code === grpc.status.INTERNAL) this.deps.onInternal(method.name, error);
    return { code: status.code, frame: [undefined, toBinary(StatusSchema, status)] };
  }

  private answerError(id: bigint, error: unknown): void {
    this.write(encodeSessionAnswer(id, undefined, toBinary(StatusSchema, toStatus(error))));
  }

  private finish(id: bigint, timer: NodeJS.Timeout | undefined): void {
    if (timer) clearTimeout(timer);
    this.running.delete(id);
    if (this.closing && this.running.size === 0) this.end();
  }

  private write(bytes: Buffer): void {
    if (!this.ended) this.stream.write(bytes);
  }

  private end(): void {
    if (!this.ended) {
      this.ended = true;
      this.onEnd();
      this.stream.end();
    }
    const drained = this.drained;
    this.drained = undefined;
    drained?.();
  }

  private abandon(): void {
    for (const call of this.running.values()) call.cancel();
    if (!this.ended) {
      this.ended = true;
      this.onEnd();
    }
    const drained = this.drained;
    this.drained = undefined;
    drained?.();
  }
}
