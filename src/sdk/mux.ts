/** Routes tasks to handlers by type. */
import type { TaskView } from "./task.js";

export interface HandlerContext {
  /** Fires at the attempt's effective deadline, when the task is cancelled, when the lease is lost, or when the worker stops. */
  signal: AbortSignal;
  /** The effective deadline of this attempt, if any. */
  deadline: Date | undefined;
  /** The lease this attempt runs under. */
  leaseId: string;
}

/**
 * A task handler. Return a Uint8Array to store it as the result, a string to store its
 * UTF-8 bytes, undefined for no result, or any other value to store its JSON. Throw to
 * fail the attempt (retried with backoff); throw `skipRetry(err)` to archive at once.
 */
export type Handler = (task: TaskView, ctx: HandlerContext) => Promise<unknown> | unknown;

export class Mux {
  private readonly handlers = new Map<string, Handler>();

  /** Registers the handler of a task type; one handler per type. */
  handle(type: string, handler: Handler): this {
    if (type === "") throw new Error("Mux.handle: type must not be empty");
    if (this.handlers.has(type)) throw new Error(`Mux.handle: a handler for ${JSON.stringify(type)} is already registered`);
    this.handlers.set(type, handler);
    return this;
  }

  handlerFor(type: string): Handler | undefined {
    return this.handlers.get(type);
  }

  get types(): string[] {
    return [...this.handlers.keys()];
  }
}

/** Encodes a handler's return value as result bytes. */
export function encodeResult(value: unknown): Uint8Array {
  if (value === undefined || value === null) return new Uint8Array();
  if (value instanceof Uint8Array) return value;
  if (typeof value === "string") return new TextEncoder().encode(value);
  return new TextEncoder().encode(JSON.stringify(value));
}
