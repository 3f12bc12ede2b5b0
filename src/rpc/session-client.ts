/**
 * The client end of SessionService (see its proto and session-server.ts): unary calls
 * carried on one stream per channel, with the unary client as the way around it.
 *
 * A call goes on the session only while the session is known open (the server's headers
 * came); otherwise it is the plain unary call, and the session is opened beside it. So
 * connection waits (`waitForReady`, `connectTimeoutMs`), TLS failures and a node that
 * has no sessions (UNIMPLEMENTED: an older node) behave exactly as unary calls do, and a
 * session only ever changes the cost of calls on a working connection. A request too
 * large for one frame goes unary too (the server's receive limit applies to the frame,
 * and an oversized frame would end the stream for every call on it).
 *
 * When the session ends:
 * - with OK (the node stops taking calls on it, after answering those it ran): every call
 *   still waiting was never run, so it is sent again as a unary call;
 * - otherwise (the connection broke): the calls waiting fail UNAVAILABLE, reason
 *   UNREACHABLE, as unary calls cut off the same way do: whether they ran is unknown.
 * Either way the next call is unary and opens a new session, after a pause that grows
 * while sessions keep failing (a node that refuses them is not asked at every call).
 *
 * An open stream keeps the process alive (grpc-js refs the connection while a call is
 * active), where an idle unary channel does not: a script that enqueues and forgets
 * `close()` must still exit. So a session with no call in flight for IDLE_END_MS ends
 * itself; the next call is unary and opens a new one. A worker's parked Lease keeps its
 * session busy, and a producer making a few calls a second keeps its own.
 */
import * as grpc from "@grpc/grpc-js";
import { fromBinary, type DescMessage } from "@bufbuild/protobuf";
import { ConveyorError } from "../base/errors.js";
import type { SessionResponse } from "../gen/conveyor/v1/session_service_pb.js";
import { StatusSchema, type Status } from "../gen/google/rpc/status_pb.js";
import { decodeMessage } from "./fast-decode.js";
import { encodeSessionCall, encodeSessionCancel, encodeSessionCredits, sessionDefinition } from "./session-frames.js";
import { fromServiceError, fromStatus } from "./status.js";
import type { CallOptions } from "./service-definition.js";

/** Requests larger than this go as unary calls (far under the node's 4 MiB frame limit). */
export const SESSION_REQUEST_MAX_BYTES = 1024 * 1024;
/** After a session fails, the next is opened no sooner than this (doubling to the max while they keep failing). */
const REOPEN_PAUSE_MS = 1_000;
const REOPEN_PAUSE_MAX_MS = 30_000;
/** A session with no call in flight this long ends (see the header). */
export const SESSION_IDLE_END_MS = 250;

type Unary = (request: unknown, options: CallOptions) => Promise<unknown>;

interface Waiting {
  method: string;
  request: unknown;
  options: CallOptions;
  unary: Unary;
  output: DescMessage;
  startedAt: number;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  /** Ends the call's timer and abort listener. */
  settle(): void;
  /** Starts the call's deadline again (an answer of a standing call came). */
  restartTimer(): void;
}

type State = "idle" | "opening" | "open" | "unsupported";

export class SessionClient {
  private readonly client: grpc.Client;
  private stream: grpc.ClientDuplexStream<Buffer, SessionResponse> | undefined;
  private state: State = "idle";
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 1;
  private failures = 0;
  private reopenAt = 0;
  private closed = false;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    channel: ReturnType<grpc.Client["getChannel"]>,
    address: string,
    credentials: grpc.ChannelCredentials,
    options: grpc.ChannelOptions,
    private readonly token: string | undefined,
  ) {
    const Ctor = grpc.makeGenericClientConstructor(sessionDefinition({}), "SessionService");
    this.client = new Ctor(address, credentials, { ...options, channelOverride: channel });
  }

  /**
   * One unary call: on the session when it is open, else `unary` (and the session is opened
   * for the calls after). `request` is encoded with `encode`, the answer decoded as `output`.
   */
  call(method: string, request: unknown, encode: (message: unknown) => Uint8Array, output: DescMessage, options: CallOptions, unary: Unary): Promise<unknown> {
    if (this.state !== "open" || this.closed) {
      this.openSoon();
      return unary(request, options);
    }
    if (options.signal?.aborted) return Promise.reject(new ConveyorError("UNAVAILABLE", "UNREACHABLE", "call cancelled"));
    const bytes = encode(request);
    if (bytes.byteLength > SESSION_REQUEST_MAX_BYTES) return unary(request, options);
    const id = this.nextId++;
    const stream = this.stream!;
    return new Promise((resolve, reject) => {
      const { signal, timeoutMs } = options;
      const fail = (error: ConveyorError) => {
        if (!this.waiting.delete(id)) return;
        waiting.settle();
        stream.write(encodeSessionCancel(id));
        this.idleSoon();
        reject(error);
      };
      const onAbort = () => fail(new ConveyorError("UNAVAILABLE", "UNREACHABLE", "call cancelled"));
      const expire = () => fail(new ConveyorError("UNAVAILABLE", "UNREACHABLE", `deadline exceeded after ${timeoutMs} ms`));
      let timer = timeoutMs ? setTimeout(expire, timeoutMs) : undefined;
      signal?.addEventListener("abort", onAbort, { once: true });
      const waiting: Waiting = {
        method, request, options, unary, output, startedAt: Date.now(), resolve, reject,
        settle: () => {
          if (timer) clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
        },
        restartTimer: () => {
          if (!timer) return;
          clearTimeout(timer);
          timer = setTimeout(expire, timeoutMs);
        },
      };
      this.waiting.set(id, waiting);
      this.busy();
      stream.write(encodeSessionCall(id, method, bytes, timeoutMs ?? 0));
      options.standing?.attached((credits) => {
        if (credits > 0 && this.waiting.get(id) === waiting && this.stream === stream) stream.write(encodeSessionCredits(id, credits));
      });
    });
  }

  /** Ends the session; calls waiting on it fail as on a closed channel. */
  close(): void {
    this.closed = true;
    this.busy();
    this.stream?.cancel();
    this.client.close();
  }

  private openSoon(): void {
    if (this.state !== "idle" || this.closed || Date.now() < this.reopenAt) return;
    this.state = "opening";
    const metadata = new grpc.Metadata();
    metadata.setOptions({ waitForReady: true });
    if (this.token) metadata.set("authorization", `Bearer ${this.token}`);
    const stream = (this.client as unknown as { session(m: grpc.Metadata): grpc.ClientDuplexStream<Buffer, SessionResponse> }).session(metadata);
    this.stream = stream;
    stream.on("metadata", () => {
      if (this.stream !== stream) return;
      this.state = "open";
      this.failures = 0;
      this.idleSoon();
    });
    stream.on("data", (answer: SessionResponse) => this.answered(answer));
    // Every end reports a status; the error event repeats a failed one.
    stream.on("error", () => {});
    stream.on("status", (status: grpc.StatusObject) => this.ended(stream, status));
  }

  /** A call went out: the session is not idle. */
  private busy(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  /** No call in flight: end the session unless one comes within SESSION_IDLE_END_MS. */
  private idleSoon(): void {
    if (this.waiting.size > 0 || this.idleTimer || this.state !== "open") return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      const stream = this.stream;
      if (this.waiting.size > 0 || this.state !== "open" || !stream) return;
      // Detached first: a call from now on is unary (and opens a new session); the server
      // ends this one with OK at once, having no call of it to answer.
      this.stream = undefined;
      this.state = "idle";
      stream.end();
    }, SESSION_IDLE_END_MS);
    this.idleTimer.unref();
  }

  private answered(answer: SessionResponse): void {
    const id = Number(answer.callId);
    const waiting = this.waiting.get(id);
    if (!waiting) return; // cancelled or timed out meanwhile
    if (answer.more) {
      // One answer of a standing call, which goes on.
      let decoded: unknown;
      try {
        decoded = decodeAnswer(waiting, answer.result);
      } catch (error) {
        // Broken (or an error said as one of several answers): the call ends here, and on the node.
        this.waiting.delete(id);
        waiting.settle();
        this.stream?.write(encodeSessionCancel(id));
        this.idleSoon();
        waiting.reject(error);
        return;
      }
      waiting.restartTimer();
      waiting.options.standing?.answered(decoded);
      return;
    }
    this.waiting.delete(id);
    waiting.settle();
    this.idleSoon();
    try {
      waiting.resolve(decodeAnswer(waiting, answer.result));
    } catch (error) {
      waiting.reject(error);
    }
  }

  private ended(stream: grpc.ClientDuplexStream<Buffer, SessionResponse>, status: grpc.StatusObject): void {
    if (this.stream !== stream) return;
    this.stream = undefined;
    const wasOpen = this.state === "open";
    if (status.code === grpc.status.UNIMPLEMENTED) {
      this.state = "unsupported";
    } else {
      this.state = "idle";
      if (status.code !== grpc.status.OK || !wasOpen) {
        this.failures++;
        this.reopenAt = Date.now() + Math.min(REOPEN_PAUSE_MAX_MS, REOPEN_PAUSE_MS * 2 ** (this.failures - 1));
      }
    }
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const w of waiting) {
      w.settle();
      if (status.code === grpc.status.OK) {
        // Never run (the node answers every call it runs before it ends a session): send it unary, in what is left of its time.
        const left = w.options.timeoutMs ? Math.max(1, w.options.timeoutMs - (Date.now() - w.startedAt)) : undefined;
        w.unary(w.request, { ...w.options, ...(left !== undefined ? { timeoutMs: left } : {}) }).then(w.resolve, w.reject);
      } else {
        w.reject(fromServiceError({ ...status, name: "Error", message: status.details } as grpc.ServiceError));
      }
    }
  }
}

/** The answer of a call, or (thrown) its error: the call's ConveyorError, or INTERNAL for an answer that does not decode. */
function decodeAnswer(waiting: Waiting, result: SessionResponse["result"]): unknown {
  const broken = (what: string, error?: unknown) =>
    new ConveyorError("INTERNAL", "INTERNAL", `the answer of ${waiting.method} ${what}${error ? `: ${(error as Error).message}` : ""}`);
  if (result.case === undefined) throw broken("carries neither a response nor an error");
  let decoded: unknown;
  try {
    decoded = result.case === "response" ? decodeMessage(waiting.output, result.value) : fromBinary(StatusSchema, result.value);
  } catch (error) {
    throw broken("does not decode", error);
  }
  if (result.case === "error") throw fromStatus(decoded as Status);
  return decoded;
}
