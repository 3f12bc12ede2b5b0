/**
 * The hand-written session frames (src/rpc/session-frames.ts) against protobuf-es: every
 * frame decodes, with protobuf-es's own reader, to the message it stands for: ids over
 * the whole safe range, methods in all of Unicode, requests and answers of any size
 * (empty ones too: an empty answer must still say "response"), errors as their Status.
 */
import fc from "fast-check";
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";
import { describe, expect, it } from "vitest";
import { SessionRequestSchema, SessionResponseSchema } from "../../src/gen/conveyor/v1/session_service_pb.js";
import { encodeSessionAnswer, encodeSessionCall, encodeSessionCancel, encodeSessionCredits } from "../../src/rpc/session-frames.js";

const ids = fc.oneof(fc.integer({ min: 1, max: 300 }), fc.maxSafeNat().filter((n) => n > 0));
const bytes = fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.uint8Array({ minLength: 100, maxLength: 70_000 }));

describe("session frames decode as protobuf-es reads them", () => {
  it("a call", () => {
    fc.assert(fc.property(ids, fc.string({ unit: "binary", maxLength: 80 }), bytes, fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 2 ** 32 - 1 })), (id, method, request, timeoutMs) => {
      const frame = fromBinary(SessionRequestSchema, encodeSessionCall(id, method, request, timeoutMs));
      expect(frame.callId).toBe(BigInt(id));
      expect(frame.method).toBe(Buffer.from(method).toString());
      expect(Buffer.from(frame.request).equals(Buffer.from(request))).toBe(true);
      expect(frame.timeoutMs).toBe(timeoutMs);
      expect(frame.cancel).toBe(false);
    }), { numRuns: 300 });
  });

  it("a cancellation", () => {
    fc.assert(fc.property(ids, (id) => {
      const frame = fromBinary(SessionRequestSchema, encodeSessionCancel(id));
      expect(frame).toMatchObject({ callId: BigInt(id), cancel: true, method: "", timeoutMs: 0 });
      expect(frame.request.byteLength).toBe(0);
    }));
  });

  it("credits for a standing call", () => {
    fc.assert(fc.property(ids, fc.integer({ min: 1, max: 2 ** 32 - 1 }), (id, credits) => {
      const frame = fromBinary(SessionRequestSchema, encodeSessionCredits(id, credits));
      expect(frame).toMatchObject({ callId: BigInt(id), credits, cancel: false, method: "", timeoutMs: 0 });
      expect(frame.request.byteLength).toBe(0);
    }));
  });

  it("an answer with a response, of any size (an empty one still says response), one of several or the last", () => {
    fc.assert(fc.property(ids, bytes, fc.boolean(), fc.boolean(), (id, body, asBigint, more) => {
      const answer = fromBinary(SessionResponseSchema, encodeSessionAnswer(asBigint ? BigInt(id) : id, body, undefined, more));
      expect(answer.callId).toBe(BigInt(id));
      expect(answer.more).toBe(more);
      expect(answer.result.case).toBe("response");
      expect(Buffer.from(answer.result.value as Uint8Array).equals(Buffer.from(body))).toBe(true);
    }), { numRuns: 300 });
  });

  it("an answer with an error: the google.rpc.Status it carries", () => {
    fc.assert(fc.property(ids, fc.integer({ min: 0, max: 16 }), fc.string({ unit: "grapheme", maxLength: 300 }), (id, code, message) => {
      const status = create(StatusSchema, { code, message });
      const answer = fromBinary(SessionResponseSchema, encodeSessionAnswer(id, undefined, toBinary(StatusSchema, status)));
      expect(answer.callId).toBe(BigInt(id));
      expect(answer.result.case).toBe("error");
      expect(equals(StatusSchema, fromBinary(StatusSchema, answer.result.value as Uint8Array), status)).toBe(true);
    }), { numRuns: 200 });
  });


});
