/**
 * SessionService as a transport (src/rpc/session-server.ts, session-client.ts), on a real
 * grpc-js server in this process whose TaskService handlers the test controls: the SDK's
 * calls move onto the session once it is open and keep the unary meaning there (answers,
 * errors with their reason, field and details, cancellation, deadlines); a bad call fails
 * alone; a closing server answers what it runs and the client sends the rest again as
 * unary calls; a server without sessions, a broken stream and a request too large for a
 * frame all fall back to unary calls.
 */
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";
import { afterEach, describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { GetTaskRequestSchema, TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import type { SessionResponse } from "../../src/gen/conveyor/v1/session_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { addUnaryService } from "../../src/rpc/server.js";
import { addSessionService, type Sessions } from "../../src/rpc/session-server.js";
import { encodeSessionCall, encodeSessionCancel, sessionDefinition } from "../../src/rpc/session-frames.js";
import { fromStatus } from "../../src/rpc/status.js";
import { SESSION_REQUEST_MAX_BYTES } from "../../src/rpc/session-client.js";
import { eventually } from "../support/node-process.js";
import { deferred } from "../support/sdk.js";

const GET_TASK = "conveyor.v1.TaskService/GetTask";

/** A TaskService whose GetTask answers by the id asked: "block:<k>" waits for release(k), "fail" throws, anything else answers. */
function controlledService() {
  const blocked = new Map<string, { release: () => void; cancelled: boolean }>();
  const waiters = new Map<string, ReturnType<typeof deferred<void>>>();
  const ran: string[] = [];
  const impl = {
    async getTask(call: { request: { id: string }; cancelled: boolean; on(e: string, f: () => void): void }) {
      const id = call.request.id;
      ran.push(id);
      if (id === "fail") {
        throw new ConveyorError("NOT_FOUND", "TASK_NOT_FOUND", "no task with id fail", "id", { details: { hint: "none" } });
      }
      if (id.startsWith("block:")) {
        const done = deferred();
        const entry = { release: () => done.resolve(undefined), cancelled: false };
        blocked.set(id.slice(6), entry);
        call.on("cancelled", () => {
          entry.cancelled = true;
          done.resolve(undefined);
        });
        waiters.get(id.slice(6))?.resolve(undefined);
        await done.promise;
      }
      return { task: { id: id.length > 100 ? `long:${id.length}` : id, queue: "q" } };
    },
  };
  return {
    impl,
    ran,
    blocked,
    /** Resolves once the call "block:<k>" runs. */
    running: async (k: string) => {
      if (blocked.has(k)) return blocked.get(k)!;
      const d = deferred();
      waiters.set(k, d);
      await d.promise;
      return blocked.get(k)!;
    },
  };
}

interface Harness {
  server: grpc.Server;
  address: string;
  sessions: Sessions | undefined;
  unaryCalls: () => number;
  sessionCalls: () => number;
  service: ReturnType<typeof controlledService>;
}

const started: Array<{ server: grpc.Server; channel?: RpcChannel }> = [];
afterEach(() => {
  for (const s of started.splice(0)) {
    s.channel?.close();
    s.server.forceShutdown();
  }
});

async function startServer(withSessions = true): Promise<Harness> {
  const server = new grpc.Server();
  const service = controlledService();
  let unary = 0;
  let session = 0;
  const onInternal = (method: string, error: unknown) => {
    throw new Error(`internal error in ${method}: ${String(error)}`);
  };
  // The same handler behind both, counted apart.
  const unaryImpl = { getTask: (call: Parameters<typeof service.impl.getTask>[0]) => (unary++, service.impl.getTask(call)) };
  addUnaryService(server, TaskService, unaryImpl as never, onInternal);
  const sessions = withSessions ? addSessionService(server, [{ service: TaskService, impl: service.impl }], { onInternal, carried: () => session++ }) : undefined;
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  started.push({ server });
  return { server, address: `127.0.0.1:${port}`, sessions, unaryCalls: () => unary, sessionCalls: () => session, service };
}

function clientOf(h: Harness) {
  const channel = new RpcChannel({ address: h.address });
  started.at(-1)!.channel = channel;
  return channel.service(TaskService, { session: true });
}

/** Makes calls until one goes on the session (the first ones are unary while it opens). */
async function untilOnSession(h: Harness, rpc: ReturnType<typeof clientOf>): Promise<void> {
  await eventually("a call on the session", async () => {
    await rpc.getTask({ id: "warm" });
    return h.sessionCalls() > 0 ? true : undefined;
  });
}

async function rejection(p: Promise<unknown>): Promise<ConveyorError> {
  try {
    await p;
  } catch (error) {
    if (error instanceof ConveyorError) return error;
    throw error;
  }
  throw new Error("expected the call to fail");
}

const fields = (e: ConveyorError) => ({ code: e.code, reason: e.reason, message: e.message, field: e.field, details: e.details });

/** A session opened by hand: frames in, answers out. */
function rawSession(address: string) {
  const Ctor = grpc.makeGenericClientConstructor(sessionDefinition({}), "SessionService");
  const client = new Ctor(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { session(): grpc.ClientDuplexStream<Buffer, SessionResponse> };
  const stream = client.session();
  const answers = new Map<number, SessionResponse>();
  const arrived: Array<() => void> = [];
  stream.on("data", (a: SessionResponse) => {
    answers.set(Number(a.callId), a);
    for (const f of arrived.splice(0)) f();
  });
  const status = new Promise<grpc.StatusObject>((resolve) => stream.on("status", resolve));
  stream.on("error", () => {});
  return {
    stream,
    status,
    answers,
    async answer(id: number): Promise<SessionResponse> {
      while (!answers.has(id)) await new Promise<void>((resolve) => arrived.push(resolve));
      return answers.get(id)!;
    },
    close: () => client.close(),
  };
}

const getTaskBytes = (id: string) => toBinary(GetTaskRequestSchema, create(GetTaskRequestSchema, { id }));

describe("calls on a session", () => {
  it("the first call is unary while the session opens; the calls after it go on the session", async () => {
    const h = await startServer();
    const rpc = clientOf(h);
    expect((await rpc.getTask({ id: "a" })).task?.id).toBe("a");
    expect(h.unaryCalls()).toBe(1);
    await untilOnSession(h, rpc);
    const before = { unary: h.unaryCalls(), session: h.sessionCalls() };
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => rpc.getTask({ id: `t${i}` })));
    expect(answers.map((a) => a.task?.id)).toEqual(Array.from({ length: 50 }, (_, i) => `t${i}`));
    expect(h.unaryCalls() - before.unary).toBe(0);
    expect(h.sessionCalls() - before.session).toBe(50);
    expect(h.sessions!.open).toBe(1);
  });

  it("an error on the session is the unary error: code, reason, message, field and details", async () => {
    const h = await startServer();
    const rpc = clientOf(h);
    const unary = await rejection(rpc.getTask({ id: "fail" }));
    await untilOnSession(h, rpc);
    const before = h.sessionCalls();
    const onSession = await rejection(rpc.getTask({ id: "fail" }));
    expect(h.sessionCalls() - before).toBe(1);
    expect(fields(onSession)).toEqual(fields(unary));
    expect(fields(onSession)).toEqual({ code: "NOT_FOUND", reason: "TASK_NOT_FOUND", message: "no task with id fail", field: "id", details: { hint: "none" } });
  });

  it("an aborted call is cancelled on the server, and fails as a cancelled unary call does", async () => {
    const h = await startServer();
    const rpc = clientOf(h);
    await untilOnSession(h, rpc);
    const abort = new AbortController();
    const call = rpc.getTask({ id: "block:1" }, { signal: abort.signal });
    const running = await h.service.running("1");
    abort.abort();
    const error = await rejection(call);
    expect(fields(error)).toMatchObject({ code: "UNAVAILABLE", reason: "UNREACHABLE", message: "call cancelled" });
    await eventually("the handler saw its call cancelled", async () => (running.cancelled ? true : undefined));
    // The session goes on.
    expect((await rpc.getTask({ id: "after" })).task?.id).toBe("after");
  });

  it("a call past its deadline fails UNAVAILABLE (as unary), and the server cancels its handler", async () => {
    const h = await startServer();
    const rpc = clientOf(h);
    await untilOnSession(h, rpc);
    const error = await rejection(rpc.getTask({ id: "block:2" }, { timeoutMs: 150 }));
    expect(fields(error)).toMatchObject({ code: "UNAVAILABLE", reason: "UNREACHABLE" });
    expect(error.message).toMatch(/deadline exceeded after 150 ms/);
    const running = await h.service.running("2");
    await eventually("the handler saw its call cancelled", async () => (running.cancelled ? true : undefined));
  });

  it("a session idle for SESSION_IDLE_END_MS ends itself; the next call is unary and opens a new one", async () => {
    const h = await startServer();
    const rpc = clientOf(h);
    await untilOnSession(h, rpc);
    expect(h.sessions!.open).toBe(1);
    await eventually("the idle session ended", async () => (h.sessions!.open === 0 ? true : undefined), 5_000);
    const unaryBefore = h.unaryCalls();
    expect((await rpc.getTask({ id: "back" })).task?.id).toBe("back");
    expect(h.unaryCalls() - unaryBefore).toBe(1);
    await untilOnSession(h, rpc);
  });

  it("a request over the frame bound goes as a unary call", async () => {
    const h = await startServer();
    const rpc = clientOf(h);
    await untilOnSession(h, rpc);
    const before = { unary: h.unaryCalls(), session: h.sessionCalls() };
    const id = "x".repeat(SESSION_REQUEST_MAX_BYTES + 10);
    expect((await rpc.getTask({ id })).task?.id).toBe(`long:${id.length}`);
    expect(h.unaryCalls() - before.unary).toBe(1);
    expect(h.sessionCalls() - before.session).toBe(0);
  });
});

describe("one call's failure is its own", () => {
  it("a request that does not decode, an unknown method and a reused call id are answered alone; the other calls are answered", async () => {
    const h = await startServer();
    const raw = rawSession(h.address);
    raw.stream.write(encodeSessionCall(1, GET_TASK, getTaskBytes("block:held"), 0));
    await h.service.running("held");
    raw.stream.write(encodeSessionCall(2, GET_TASK, Uint8Array.from([0x0a, 0x05, 0xff, 0xfe, 0x00, 0x01, 0x02]), 0)); // id: 5 bytes, not UTF-8
    raw.stream.write(encodeSessionCall(3, "conveyor.v1.TaskService/NoSuchMethod", getTaskBytes("x"), 0));
    raw.stream.write(encodeSessionCall(1, GET_TASK, getTaskBytes("again"), 0));
    raw.stream.write(encodeSessionCall(4, GET_TASK, Uint8Array.from([0x0a, 0x7f]), 0)); // truncated
    raw.stream.write(encodeSessionCall(5, GET_TASK, getTaskBytes("fine"), 0));

    const errorOf = async (id: number) => {
      const a = await raw.answer(id);
      expect(a.result.case).toBe("error");
      return fields(fromStatus(fromBinary(StatusSchema, a.result.value as Uint8Array)));
    };
    expect(await errorOf(2)).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "id" });
    expect(await errorOf(3)).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "method" });
    expect(await errorOf(4)).toMatchObject({ code: "INVALID_ARGUMENT", reason: "MALFORMED_REQUEST" });
    const fine = await raw.answer(5);
    expect(fine.result.case).toBe("response");
    // The reused id was refused without touching the call that holds it.
    expect((await raw.answer(1)).result.case).toBe("error");
    expect(h.service.ran).not.toContain("again");
    h.service.blocked.get("held")!.release();
    raw.answers.delete(1);
    const held = await raw.answer(1);
    expect(held.result.case).toBe("response");
    raw.close();
  });

  it("a cancel frame cancels only its call", async () => {
    const h = await startServer();
    const raw = rawSession(h.address);
    raw.stream.write(encodeSessionCall(1, GET_TASK, getTaskBytes("block:a"), 0));
    raw.stream.write(encodeSessionCall(2, GET_TASK, getTaskBytes("block:b"), 0));
    const [a, b] = [await h.service.running("a"), await h.service.running("b")];
    raw.stream.write(encodeSessionCancel(1));
    await eventually("call 1 cancelled", async () => (a.cancelled ? true : undefined));
    expect(b.cancelled).toBe(false);
    b.release();
    expect((await raw.answer(2)).result.case).toBe("response");
    expect(raw.answers.has(1)).toBe(false);
    raw.close();
  });

  it("a frame that does not decode ends that stream INVALID_ARGUMENT; the server serves on", async () => {
    const h = await startServer();
    const raw = rawSession(h.address);
    raw.stream.write(Buffer.from([0x08, 0xff]));
    const status = await raw.status;
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(status.details).toMatch(/does not decode as conveyor.v1.SessionRequest/);
    raw.close();
    const rpc = clientOf(h);
    expect((await rpc.getTask({ id: "still" })).task?.id).toBe("still");
  });
});

describe("when there is no session to use", () => {
  it("a server without SessionService: every call is unary and answered", async () => {
    const h = await startServer(false);
    const rpc = clientOf(h);
    for (let i = 0; i < 5; i++) expect((await rpc.getTask({ id: `u${i}` })).task?.id).toBe(`u${i}`);
    expect(h.unaryCalls()).toBe(5);
    expect(h.sessionCalls()).toBe(0);
  });

  it("a closing server answers the calls it runs, never runs the ones after, and the client sends those again unary", async () => {
    const h = await startServer();
    const rpc = clientOf(h);
    await untilOnSession(h, rpc);
    const first = rpc.getTask({ id: "block:first" });
    const running = await h.service.running("first");
    const closed = h.sessions!.close();
    const unaryBefore = h.unaryCalls();
    const later = rpc.getTask({ id: "later" }); // on the session: the client has not heard of the close yet
    running.release();
    expect((await first).task?.id).toBe("block:first");
    expect((await later).task?.id).toBe("later");
    await closed;
    expect(h.unaryCalls() - unaryBefore).toBe(1);
    expect(h.service.ran.filter((id) => id === "later")).toHaveLength(1);
    expect(h.sessions!.open).toBe(0);
  });

  it("a broken stream fails the calls waiting on it UNAVAILABLE, reason UNREACHABLE (whether they ran is unknown)", async () => {
    const h = await startServer();
    const rpc = clientOf(h);
    await untilOnSession(h, rpc);
    const waiting = rpc.getTask({ id: "block:cut" });
    await h.service.running("cut");
    h.server.forceShutdown();
    const error = await rejection(waiting);
    expect(fields(error)).toMatchObject({ code: "UNAVAILABLE", reason: "UNREACHABLE" });
  });
});
