/**
 * A generic JSON transport for unary protobuf-es services, mounted on the node's HTTP
 * port for the dashboard (and curl): `POST /api/<service.typeName>/<MethodName>` with a
 * JSON body in the protobuf JSON mapping. It calls the very implementation objects the
 * gRPC server uses, so a method added to a service appears here with no code change.
 *
 *   curl -s -H 'content-type: application/json' -d '{}' \
 *     http://127.0.0.1:8080/api/conveyor.v1.AdminService/ListQueues
 *
 * Errors answer with an HTTP status derived from the ConveyorError code and a body
 * `{ code, reason, message, field?, details? }`; anything that is not a ConveyorError is INTERNAL,
 * reported through `onInternal` and never sent.
 */
import { isUtf8 } from "node:buffer";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TLSSocket } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { fromJson, type DescMethod, type DescService, type JsonValue } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { ConveyorError, type ErrorCode } from "../base/errors.js";
import { JSON_API_BODY_MAX_BYTES, quote, REQUEST_NESTING_MAX_DEPTH, truncateText } from "../base/limits.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import { toApiJson } from "../rpc/json-dialect.js";
import type { HttpRoute } from "./http.js";
import { JsonNesting } from "./json-nesting.js";

export const JSON_API_PREFIX = "/api/";
export const JSON_API_MAX_BODY_BYTES = JSON_API_BODY_MAX_BYTES;

type Handler = (call: unknown) => Promise<unknown>;

/** One service exposed over JSON: its descriptor and its (gRPC) implementation. */
export interface JsonApiBinding {
  readonly service: DescService;
  readonly impl: Readonly<Record<string, Handler>>;
}

/** Pairs a service descriptor with its implementation, type-checked against each other. */
export function jsonService<S extends GenService<GenServiceMethods>>(service: S, impl: UnaryImpl<S>): JsonApiBinding {
  return { service, impl: impl as unknown as Record<string, Handler> };
}

export interface JsonApiOptions {
  /** A handler failed with something that is not a ConveyorError (a bug): log it. */
  onInternal: (method: string, error: unknown) => void;
  /** Largest accepted request body; default 2 MiB. */
  maxBodyBytes?: number;
}

const HTTP_STATUS: Record<ErrorCode, number> = {
  INVALID_ARGUMENT: 400,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  // A state conflict ("the task is active"), not an HTTP precondition header: 409.
  FAILED_PRECONDITION: 409,
  RESOURCE_EXHAUSTED: 429,
  UNAVAILABLE: 503,
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  INTERNAL: 500,
};

export function httpStatusOf(code: ErrorCode): number {
  return HTTP_STATUS[code] ?? 500;
}

/** An error of the transport itself (bad JSON, unknown method, ...), before any handler runs. */
class TransportError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly reason: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

interface Route {
  method: DescMethod;
  handler: Handler;
}

export function jsonApiRoute(bindings: readonly JsonApiBinding[], options: JsonApiOptions): HttpRoute {
  const maxBody = options.maxBodyBytes ?? JSON_API_MAX_BODY_BYTES;
  const services = new Map<string, Map<string, Route>>();
  for (const { service, impl } of bindings) {
    const methods = new Map<string, Route>();
    for (const method of service.methods) {
      const handler = impl[method.localName];
      if (method.methodKind !== "unary" || typeof handler !== "function") continue;
      methods.set(method.name, { method, handler: handler.bind(impl) });
    }
    services.set(service.typeName, methods);
  }

  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (!path.startsWith(JSON_API_PREFIX)) return false;
    let methodName = path;
    try {
      const route = resolve(path.slice(JSON_API_PREFIX.length));
      methodName = route.method.name;
      checkRequest(req);
      const body = await readBody(req, maxBody, route.method);
      const request = parseRequest(route.method, body);
      // What the implementations see of a grpc-js ServerUnaryCall (they read `request`).
      // The Authorization header travels as gRPC metadata does, so the one guard (security/guard.ts) reads both.
      const metadata = new grpc.Metadata();
      if (req.headers.authorization !== undefined) metadata.set("authorization", req.headers.authorization);
      const call = {
        request, cancelled: false, metadata, transport: "http", on() {}, getPeer: () => req.socket.remoteAddress ?? "",
        // A verified client certificate (mTLS), as grpc-js offers it.
        getAuthContext: () => ({ sslPeerCertificate: "getPeerCertificate" in req.socket ? (req.socket as TLSSocket).getPeerCertificate() : undefined }),
      };
      const response = await route.handler(call);
      const json = toApiJson(route.method.output, response as never);
      send(res, 200, json);
    } catch (error) {
      if (error instanceof TransportError) {
        send(res, error.status, { code: error.code, reason: error.reason, message: error.message }, error.headers);
      } else if (error instanceof ConveyorError) {
        if (error.code === "INTERNAL") options.onInternal(methodName, error); // as the gRPC server does
        send(res, httpStatusOf(error.code), {
          code: error.code, reason: error.reason, message: error.message,
          ...(error.field ? { field: error.field } : {}), ...(error.details ? { details: error.details } : {}),
        });
      } else {
        options.onInternal(methodName, error);
        send(res, 500, { code: "INTERNAL", reason: "INTERNAL", message: "internal error; see the server log" });
      }
    }
    return true;
  };

  function resolve(rest: string): Route {
    const slash = rest.lastIndexOf("/");
    const serviceName = slash < 0 ? rest : rest.slice(0, slash);
    const methodName = slash < 0 ? "" : rest.slice(slash + 1);
    const methods = services.get(serviceName);
    if (!methods) {
      throw new TransportError(404, "NOT_FOUND", "UNKNOWN_SERVICE",
        `no service ${quote(serviceName)}; the JSON API serves ${[...services.keys()].join(", ")}`);
    }
    const route = methods.get(methodName);
    if (!route) throw new TransportError(404, "NOT_FOUND", "UNKNOWN_METHOD", `${serviceName} has no method ${quote(methodName)}`);
    return route;
  }
}

function checkRequest(req: IncomingMessage): void {
  if (req.method !== "POST") {
    throw new TransportError(405, "INVALID_ARGUMENT", "METHOD_NOT_ALLOWED", `use POST, not ${req.method ?? "?"}`, { allow: "POST" });
  }
  // application/json forces a CORS preflight on cross-origin requests (which this port
  // never approves), and a browser's Origin must be this host: no cross-site writes.
  const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/json") {
    throw new TransportError(415, "INVALID_ARGUMENT", "UNSUPPORTED_MEDIA_TYPE",
      `send the request body as content-type application/json${type ? `, not ${type}` : ""}`);
  }
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== "null") {
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    if (host !== req.headers.host) {
      throw new TransportError(403, "FAILED_PRECONDITION", "CROSS_ORIGIN", `requests from origin ${origin} are not allowed`);
    }
  }
}

/**
 * The body as text. Past `maxBytes`, or once it nests deeper than
 * REQUEST_NESTING_MAX_DEPTH (json-nesting.ts), nothing more is kept, but the rest is read
 * and dropped so the client gets its 413 or 400 instead of a reset connection; a body
 * beyond 8 × `maxBytes` is not worth reading and its connection is destroyed.
 */
function readBody(req: IncomingMessage, maxBytes: number, method: DescMethod): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const nesting = new JsonNesting(REQUEST_NESTING_MAX_DEPTH);
    const abandon = () => {
      req.destroy();
      reject(tooLarge(maxBytes));
    };
    if (Number(req.headers["content-length"] ?? 0) > 8 * maxBytes) return abandon();
    req.on("data", (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size <= maxBytes && !nesting.feed(chunk)) chunks.push(chunk);
      else if (size > 8 * maxBytes) abandon();
    });
    req.on("end", () => {
      if (size > maxBytes) return reject(tooLarge(maxBytes));
      if (nesting.exceeded) {
        return reject(new TransportError(400, "INVALID_ARGUMENT", "BAD_JSON",
          `request body nests arrays and objects deeper than ${REQUEST_NESTING_MAX_DEPTH} levels (the limit); no ${method.input.typeName} needs that many`));
      }
      const body = Buffer.concat(chunks);
      if (!isUtf8(body)) return reject(new TransportError(400, "INVALID_ARGUMENT", "BAD_JSON", "request body is not valid UTF-8"));
      resolve(body.toString("utf8"));
    });
    req.on("error", reject);
  });
}

function tooLarge(maxBytes: number): TransportError {
  return new TransportError(413, "INVALID_ARGUMENT", "BODY_TOO_LARGE",
    `request body is larger than ${maxBytes} bytes`, { connection: "close" });
}

function parseRequest(method: DescMethod, body: string): unknown {
  let json: JsonValue;
  try {
    json = body.trim() === "" ? {} : (JSON.parse(body) as JsonValue);
  } catch (e) {
    throw new TransportError(400, "INVALID_ARGUMENT", "BAD_JSON", `request body is not valid JSON: ${(e as Error).message}`);
  }
  // fromJson also refuses strings with no UTF-8 form (lone surrogates from "\ud800" escapes), naming the field.
  try {
    return fromJson(method.input, json, { ignoreUnknownFields: false });
  } catch (e) {
    throw new TransportError(400, "INVALID_ARGUMENT", "BAD_REQUEST", `request body does not match ${method.input.typeName}: ${truncateText((e as Error).message, 1024)}`);
  }
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.destroyed) return; // an abandoned oversized request
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    ...headers,
  });
  res.end(text);
}
