/**
 * The frames of SessionService (proto/conveyor/v1/session_service.proto), written by
 * hand: each carries an already encoded request or answer, so writing one is a header
 * and one copy of those bytes, where protobuf-es would build a message and copy the
 * bytes again. `test/property/session-frames.property.test.ts` checks every frame
 * against protobuf-es's own decoding.
 *
 * Also the grpc-js definition of the one method: its messages are these Buffers as they
 * are (serialize = identity), and the frames that come in are decoded by the caller's
 * function (the server's never throws; see session-server.ts).
 */
import type * as grpc from "@grpc/grpc-js";
import { decodeMessage } from "./fast-decode.js";
import { SessionResponseSchema, SessionRequestSchema, type SessionResponse } from "../gen/conveyor/v1/session_service_pb.js";

// Tags: field number << 3 | wire type (0 varint, 2 length-delimited).
const CALL_ID = 0x08;
const METHOD = 0x12;
const REQUEST = 0x1a;
const TIMEOUT_MS = 0x20;
const CANCEL = 0x28;
const CREDITS = 0x30;
const RESPONSE = 0x12;
const ERROR = 0x1a;
const MORE = 0x20;

function varintSize(value: number): number {
  let size = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 128);
    size++;
  }
  return size;
}

function writeVarint(buf: Buffer, pos: number, value: number): number {
  while (value >= 0x80) {
    buf[pos++] = (value % 128) | 0x80;
    value = Math.floor(value / 128);
  }
  buf[pos++] = value;
  return pos;
}

/** A call id as a number (ids are counters, far below 2^53). */
const idNumber = (id: bigint | number) => (typeof id === "bigint" ? Number(id) : id);

/** A SessionRequest that starts a call. */
export function encodeSessionCall(callId: number, method: string, request: Uint8Array, timeoutMs: number): Buffer {
  const methodBytes = Buffer.byteLength(method);
  const size = 1 + varintSize(callId) + 1 + varintSize(methodBytes) + methodBytes
    + 1 + varintSize(request.byteLength) + request.byteLength + (timeoutMs > 0 ? 1 + varintSize(timeoutMs) : 0);
  const buf = Buffer.allocUnsafe(size);
  buf[0] = CALL_ID;
  let pos = writeVarint(buf, 1, callId);
  buf[pos++] = METHOD;
  pos = writeVarint(buf, pos, methodBytes);
  pos += buf.write(method, pos);
  buf[pos++] = REQUEST;
  pos = writeVarint(buf, pos, request.byteLength);
  buf.set(request, pos);
  pos += request.byteLength;
  if (timeoutMs > 0) {
    buf[pos++] = TIMEOUT_MS;
    writeVarint(buf, pos, timeoutMs);
  }
  return buf;
}

/** A SessionRequest that cancels the call `callId`. */
export function encodeSessionCancel(callId: number): Buffer {
  const buf = Buffer.allocUnsafe(1 + varintSize(callId) + 2);
  buf[0] = CALL_ID;
  const pos = writeVarint(buf, 1, callId);
  buf[pos] = CANCEL;
  buf[pos + 1] = 1;
  return buf;
}

/** A SessionRequest that grants the standing call `callId` `credits` more deliveries. */
export function encodeSessionCredits(callId: number, credits: number): Buffer {
  const buf = Buffer.allocUnsafe(1 + varintSize(callId) + 1 + varintSize(credits));
  buf[0] = CALL_ID;
  let pos = writeVarint(buf, 1, callId);
  buf[pos++] = CREDITS;
  writeVarint(buf, pos, credits);
  return buf;
}

/**
 * A SessionResponse: the encoded answer, or the encoded google.rpc.Status of a failure;
 * `more`: one answer of a standing call, which goes on.
 */
export function encodeSessionAnswer(callId: bigint | number, response: Uint8Array | undefined, error: Uint8Array | undefined, more = false): Buffer {
  const id = idNumber(callId);
  const body = response ?? error ?? new Uint8Array();
  const size = 1 + varintSize(id) + 1 + varintSize(body.byteLength) + body.byteLength + (more ? 2 : 0);
  const buf = Buffer.allocUnsafe(size);
  buf[0] = CALL_ID;
  let pos = writeVarint(buf, 1, id);
  buf[pos++] = response ? RESPONSE : ERROR;
  pos = writeVarint(buf, pos, body.byteLength);
  buf.set(body, pos);
  pos += body.byteLength;
  if (more) {
    buf[pos++] = MORE;
    buf[pos] = 1;
  }
  return buf;
}

export const SESSION_PATH = "/conveyor.v1.SessionService/Session";

const identity = (message: unknown) => message as Buffer;

/** The grpc-js definition of SessionService: frames in and out as Buffers, incoming ones through `decode`. */
export function sessionDefinition(decode: { request?: (bytes: Buffer) => unknown; response?: (bytes: Buffer) => unknown }): grpc.ServiceDefinition {
  return {
    session: {
      path: SESSION_PATH,
      originalName: "Session",
      requestStream: true,
      responseStream: true,
      requestSerialize: identity,
      requestDeserialize: decode.request ?? ((bytes: Buffer) => decodeMessage(SessionRequestSchema, bytes)),
      responseSerialize: identity,
      responseDeserialize: decode.response ?? ((bytes: Buffer) => decodeMessage(SessionResponseSchema, bytes) as SessionResponse),
    },
  };
}
