/** Routes tasks to handlers by type. */
import { strategyToWire, type StrategyName } from "../rpc/wire-names.js";
import type { TaskView } from "./task.js";

export interface HandlerContext {
  /**
   * Fires at the attempt's effective deadline, when the task is cancelled, when the lease
   * is lost, or when the worker stops. At the deadline the node has already failed the
   * attempt (retry with backoff, or archived): whatever the handler returns afterwards is
   * ignored and its worker slot is already free.
   */
  signal: AbortSignal;
  /**
   * The effective deadline of this attempt (the earlier of the lease time + timeout and
   * the task's deadline), on this process's clock; undefined when there is none.
   */
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

/** A LimitStrategy's name (task.proto lists them). */
export type ConcurrencyStrategy = StrategyName;

/**
 * A concurrency rule of a task type. The key is a CEL expression over `input` (the
 * task's JSON payload) and `additional_metadata` (its metadata), e.g. "input.userId".
 */
export interface ConcurrencyRuleSpec {
  /** Rules with the same name share one budget across task types and queues. */
  name?: string;
  expression: string;
  /** The limit per key: a number, or a CEL expression such as "input.tier == 'premium' ? 10 : 1". */
  maxRuns: number | string;
  limitStrategy: ConcurrencyStrategy;
}

export interface HandleOptions {
  /** Concurrency rules of the type, in chain order; registered when the worker starts. */
  concurrency?: ConcurrencyRuleSpec[];
}

/**
 * A batch handler: all members of a fired group in one call. Return normally to complete
 * every member; throw to retry every member (or `skipRetry(err)` to archive them all);
 * throw a `BatchError` to give named members their own outcome (the rest complete).
 */
export type BatchHandler = (tasks: TaskView[], ctx: HandlerContext) => Promise<unknown> | unknown;

export class Mux {
  private readonly handlers = new Map<string, Handler>();
  private readonly batchHandlers = new Map<string, BatchHandler>();
  private readonly rules = new Map<string, ConcurrencyRuleSpec[]>();

  /** Registers the handler of a task type (and its concurrency rules); one handler per type. */
  handle(type: string, handler: Handler, options: HandleOptions = {}): this {
    if (type === "") throw new Error("Mux.handle: type must not be empty");
    if (this.handlers.has(type)) throw new Error(`Mux.handle: a handler for ${JSON.stringify(type)} is already registered`);
    this.handlers.set(type, handler);
    if (options.concurrency) this.rules.set(type, options.concurrency);
    return this;
  }

  /** The concurrency rules declared for a type ([] when none). */
  rulesFor(type: string): ConcurrencyRuleSpec[] {
    return this.rules.get(type) ?? [];
  }

  /**
   * Registers the batch handler of a task type. The worker then receives that type's
   * group batches; the handler also serves single tasks of the type that have no plain
   * handler (as a batch of one).
   */
  handleBatch(type: string, handler: BatchHandler): this {
    if (type === "") throw new Error("Mux.handleBatch: type must not be empty");
    if (this.batchHandlers.has(type)) throw new Error(`Mux.handleBatch: a batch handler for ${JSON.stringify(type)} is already registered`);
    this.batchHandlers.set(type, handler);
    return this;
  }

  handlerFor(type: string): Handler | undefined {
    const single = this.handlers.get(type);
    if (single) return single;
    const batch = this.batchHandlers.get(type);
    return batch && ((task, ctx) => batch([task], ctx));
  }

  batchHandlerFor(type: string): BatchHandler | undefined {
    return this.batchHandlers.get(type);
  }

  get types(): string[] {
    return [...new Set([...this.handlers.keys(), ...this.batchHandlers.keys()])];
  }

  /** Types with a batch handler (advertised to the server in every Lease call). */
  get batchTypes(): string[] {
    return [...this.batchHandlers.keys()];
  }
}

/** Encodes a handler's return value as result bytes. */
export function encodeResult(value: unknown): Uint8Array {
  if (value === undefined || value === null) return new Uint8Array();
  if (value instanceof Uint8Array) return value;
  if (typeof value === "string") return new TextEncoder().encode(value);
  return new TextEncoder().encode(JSON.stringify(value));
}

/** A rule as the wire carries it (RegisterTaskTypes, SetStrategies). */
export function ruleToWire(r: ConcurrencyRuleSpec) {
  return {
    name: r.name ?? "", expression: r.expression,
    maxRuns: typeof r.maxRuns === "number" ? r.maxRuns : 0,
    maxRunsExpression: typeof r.maxRuns === "string" ? r.maxRuns : "",
    strategy: strategyToWire(r.limitStrategy),
  };
}
