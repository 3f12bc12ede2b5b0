// The node's JSON API: POST /api/<service>/<Method> with protobuf JSON, served by the
// same AdminService/TaskService implementations as gRPC.

import { askForToken, authHeaders } from "./auth.js";

export const ADMIN = "conveyor.v1.AdminService";
export const TASKS = "conveyor.v1.TaskService";

/** The node answered with an error: `message` is the server's own words. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = body?.code ?? `HTTP_${status}`;
    this.reason = body?.reason ?? "";
    this.field = body?.field ?? "";
  }
}

/** The node could not be reached at all (stopped, network down). */
export class UnreachableError extends Error {
  constructor(cause) {
    super(`cannot reach the node at ${location.host}`);
    this.name = "UnreachableError";
    this.cause = cause;
  }
}

const listeners = new Set();
let reachable = true;

/** Subscribes to reachability changes: fn(reachable: boolean). Returns an unsubscribe. */
export function onReachability(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function isReachable() {
  return reachable;
}

function setReachable(value) {
  if (value === reachable) return;
  reachable = value;
  for (const fn of listeners) fn(value);
}

export async function call(service, method, body = {}) {
  let res;
  let text;
  try {
    res = await fetch(`/api/${service}/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...authHeaders() },
      body: JSON.stringify(body),
      cache: "no-store",
    });
    text = await res.text();
  } catch (cause) {
    setReachable(false);
    throw new UnreachableError(cause);
  }
  setReachable(true);
  let data;
  try {
    data = text ? JSON.parse(text) : {};
  } catch {
    data = undefined;
  }
  if (res.status === 401) askForToken(data?.message ?? "Enter a token from the node's auth file.");
  if (!res.ok) throw new ApiError(res.status, data ?? { message: text.trim() || `HTTP ${res.status} ${res.statusText}` });
  if (data === undefined) throw new ApiError(res.status, { message: "the node sent a response that is not JSON" });
  return data;
}

export const admin = (method, body) => call(ADMIN, method, body);
export const tasks = (method, body) => call(TASKS, method, body);

/** Words for an error caught around an API call. */
export function describeError(err) {
  if (err instanceof UnreachableError) return "Cannot reach the node. The action was not sent; try again when the node is back.";
  if (err instanceof ApiError) return err.message;
  return `Unexpected error in the dashboard: ${err?.message ?? err}`;
}
