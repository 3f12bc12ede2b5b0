/** The limits module's helpers, the status mapper's safety net, and request decoding. */
import { create, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { ConveyorError, grainDeactivated, nodeStopping, taskNotFound } from "../../src/base/errors.js";
import {
  DURATION_MAX_MS, INSTANT_MAX_MS, QUOTE_MAX_CHARS, RATE_MIN_PER_SEC, STATUS_MESSAGE_MAX_BYTES, TASK_MAX_BYTES,
  formatBytes, quote, truncateBytes, truncateText, utf8Bytes,
} from "../../src/base/limits.js";
import { fromServiceError, toServiceError } from "../../src/rpc/status.js";
import { decodeRequest, UndecodableRequest } from "../../src/rpc/request-decode.js";
import { EnqueueRequestSchema } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { describeFailure } from "../../cli/failure.js";

const describeError = (err: unknown, where: { server: string; json: boolean; timeoutMs: number }) => describeFailure(err, where).message;

describe("time bounds", () => {
  it("keep every derived instant a safe integer and a valid Date", () => {
    expect(new Date(INSTANT_MAX_MS).toISOString()).toBe("9999-12-31T23:59:59.999Z");
    expect(Number.isInteger(DURATION_MAX_MS)).toBe(true);
    // The most the engine adds to an instant: a few durations (timeout, backoff, retention, ...).
    const latest = INSTANT_MAX_MS + 4 * DURATION_MAX_MS;
    expect(Number.isSafeInteger(latest)).toBe(true);
    expect(Number.isNaN(new Date(latest).getTime())).toBe(false);
    expect(BigInt(latest) < 2n ** 63n).toBe(true);
    // The wait for a token at the slowest rate is itself a bounded duration.
    expect((1 / RATE_MIN_PER_SEC) * 1000).toBeLessThan(DURATION_MAX_MS);
  });

  it("keep a whole task inside gRPC's default 4 MiB message", () => {
    expect(TASK_MAX_BYTES).toBeLessThan(4 * 1024 * 1024);
  });
});

describe("quote", () => {
  it("quotes a short value whole and a long one as a prefix with its length", () => {
    expect(quote("abc")).toBe('"abc"');
    const long = quote("i".repeat(70_000));
    expect(long).toBe(`"${"i".repeat(QUOTE_MAX_CHARS)}"… (70000 characters)`);
  });

  it("never splits a surrogate pair", () => {
    const text = `${"a".repeat(QUOTE_MAX_CHARS - 1)}😀😀`;
    expect(quote(text)).toBe(`"${"a".repeat(QUOTE_MAX_CHARS - 1)}"… (${text.length} characters)`);
  });

  it("is what taskNotFound uses", () => {
    expect(taskNotFound("x".repeat(1000)).message.length).toBeLessThan(120);
  });
});

describe("truncation with a marker", () => {
  it("leaves values within the limit alone", () => {
    expect(truncateText("hello", 5)).toBe("hello");
    const bytes = new Uint8Array([1, 2, 3]);
    expect(truncateBytes(bytes, 3)).toBe(bytes);
  });

  it("cuts text to the limit, marks what was dropped, and never splits a character", () => {
    const text = "é".repeat(10_000); // 20,000 bytes
    const cut = truncateText(text, 1000);
    expect(utf8Bytes(cut)).toBeLessThanOrEqual(1000);
    expect(cut).toMatch(/^é+…\[truncated 18\.\d KiB\]$/);
    expect(cut).not.toContain("\uFFFD");
  });

  it("cuts bytes the same way", () => {
    const big = new Uint8Array(30 * 1024 * 1024).fill(65);
    const cut = truncateBytes(big, 1024 * 1024);
    expect(cut.byteLength).toBeLessThanOrEqual(1024 * 1024);
    expect(new TextDecoder().decode(cut.subarray(cut.byteLength - 40))).toMatch(/…\[truncated 29(\.0)? MiB\]$/);
    expect(cut[0]).toBe(65);
  });

  it("formats sizes", () => {
    expect(formatBytes(512)).toBe("512 bytes");
    expect(formatBytes(2048)).toBe("2 KiB");
    expect(formatBytes(1.5 * 1024 * 1024)).toBe("1.5 MiB");
  });
});

describe("status mapping", () => {
  const roundTrip = (e: ConveyorError) => {
    const status = toServiceError(e);
    return { status, back: fromServiceError({ ...status, message: status.details, name: "Error" } as grpc.ServiceError) };
  };

  it("caps the message that travels in a header, whatever an error quotes", () => {
    const { status, back } = roundTrip(new ConveyorError("NOT_FOUND", "TASK_NOT_FOUND", `task ${"i".repeat(70_000)} not found`));
    expect(utf8Bytes(status.details!)).toBeLessThanOrEqual(STATUS_MESSAGE_MAX_BYTES);
    expect(status.details).toMatch(/…\[truncated \d+(\.\d)? KiB\]$/);
    expect(back).toMatchObject({ code: "NOT_FOUND", reason: "TASK_NOT_FOUND" });
  });

  it("keeps GRAIN_DEACTIVATED intact: retryable UNAVAILABLE, not a transport failure", () => {
    const { back } = roundTrip(grainDeactivated("reports"));
    expect(back).toMatchObject({ code: "UNAVAILABLE", reason: "GRAIN_DEACTIVATED" });
    const said = describeError(back, { server: "127.0.0.1:7233", json: false, timeoutMs: 10_000 });
    expect(said).toBe('queue "reports" was being reloaded; retry');
    expect(said).not.toMatch(/cannot reach/);
  });

  const clientError = (code: grpc.status, message: string, metadata = new grpc.Metadata()) =>
    fromServiceError({ code, details: message, metadata, message, name: "Error" } as grpc.ServiceError);

  it("a transport failure is UNREACHABLE on the client, never INTERNAL or WRONG_OWNER", () => {
    const globals = { server: "127.0.0.1:1", json: false, timeoutMs: 10_000 };
    const down = clientError(grpc.status.UNAVAILABLE, "No connection established");
    expect(down).toMatchObject({ code: "UNAVAILABLE", reason: "UNREACHABLE" });
    expect(describeError(down, globals)).toBe("cannot reach conveyor at 127.0.0.1:1 (is conveyord running?)");
    const slow = clientError(grpc.status.DEADLINE_EXCEEDED, "Deadline exceeded");
    expect(slow).toMatchObject({ code: "UNAVAILABLE", reason: "UNREACHABLE" });
    expect(describeError(slow, globals)).toMatch(/^no answer from conveyor at 127.0.0.1:1 within 10s/);
    // A details trailer that is not conveyor's (a proxy's) names no owner either.
    const foreign = new grpc.Metadata();
    foreign.set("grpc-status-details-bin", Buffer.from([0x08, 0x0e]));
    expect(clientError(grpc.status.UNAVAILABLE, "upstream connect error", foreign)).toMatchObject({ reason: "UNREACHABLE" });
  });

  it("a status without conveyor's details and no transport code is INTERNAL", () => {
    expect(clientError(grpc.status.UNKNOWN, "boom")).toMatchObject({ code: "INTERNAL", reason: "INTERNAL" });
  });

  it("keeps every server reason intact, WRONG_OWNER and NODE_STOPPING included", () => {
    for (const e of [new ConveyorError("UNAVAILABLE", "WRONG_OWNER", "queue q is owned by node b"), nodeStopping(),
      new ConveyorError("NOT_FOUND", "RULES_NOT_FOUND", "x"), new ConveyorError("NOT_FOUND", "GROUP_CONFIG_NOT_FOUND", "x")]) {
      expect(roundTrip(e).back).toMatchObject({ code: e.code, reason: e.reason });
    }
  });
});

describe("request decoding", () => {
  it("names a string field that is not UTF-8 (in a nested message, a map)", () => {
    const valid = toBinary(EnqueueRequestSchema, create(EnqueueRequestSchema, { task: { type: "AAAA", queue: "q", metadata: { k: "BBBB" } } }));
    const corrupt = (marker: string) => {
      const bytes = Uint8Array.from(valid);
      const at = Buffer.from(bytes).indexOf(marker);
      bytes[at] = 0xff;
      return bytes;
    };
    const type = decodeRequest(EnqueueRequestSchema, corrupt("AAAA"));
    expect(type).toBeInstanceOf(UndecodableRequest);
    expect((type as UndecodableRequest).error).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "task.type" });
    const meta = decodeRequest(EnqueueRequestSchema, corrupt("BBBB")) as UndecodableRequest;
    expect(meta.error).toMatchObject({ code: "INVALID_ARGUMENT", field: "task.metadata" });
    expect(meta.error.message).toMatch(/not valid UTF-8/);
  });

  it("answers bytes that are not a message at all as MALFORMED_REQUEST", () => {
    const r = decodeRequest(EnqueueRequestSchema, Uint8Array.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f])) as UndecodableRequest;
    expect(r.error).toMatchObject({ code: "INVALID_ARGUMENT", reason: "MALFORMED_REQUEST" });
  });

  it("decodes a valid request", () => {
    const bytes = toBinary(EnqueueRequestSchema, create(EnqueueRequestSchema, { task: { type: "t" } }));
    expect(decodeRequest(EnqueueRequestSchema, bytes)).toMatchObject({ task: { type: "t" } });
  });
});
