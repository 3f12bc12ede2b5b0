/**
 * The producer client. Overlapping `enqueue` calls (made in one event-loop turn, or
 * while an earlier one is in flight) go out as one EnqueueBatch RPC, each caller getting
 * its own outcome (enqueue-coalescer.ts says when and why); a lone call goes out at once
 * as a plain Enqueue. `coalesceEnqueues: false` sends every call alone.
 */
import { ConveyorError } from "../base/errors.js";
import { BATCH_MAX, REQUEST_MAX_BYTES, WAIT_TASK_MAX_MS } from "../base/limits.js";
import { parseDurationMs } from "../base/duration.js";
import { TaskService } from "../gen/conveyor/v1/task_service_pb.js";
import type { EnqueueResult, TaskSpec } from "../gen/conveyor/v1/task_pb.js";
import { fromItemError } from "../rpc/status.js";
import type { RpcChannel } from "../rpc/client.js";
import { connectTo, type ConnectionOptions } from "./connection.js";
import type { UnaryClient } from "../rpc/service-definition.js";
import { stateName, toSpec, toTaskView, type Duration, type EnqueueOptions, type NewTaskSpec, type TaskState, type TaskView } from "./task.js";
import { Admin } from "./admin.js";
import { toTaskDetail, type TaskDetail } from "./attempts.js";
import { EnqueueCoalescer } from "./enqueue-coalescer.js";
import { TaskFailedError, WaitTimeoutError } from "./errors.js";

export interface ClientOptions extends ConnectionOptions {
  /** Deadline of each RPC once connected; default 30 s. */
  timeoutMs?: number;
  /**
   * Send overlapping `enqueue` calls as one EnqueueBatch (default true): one RPC's cost
   * for many tasks, with each caller's outcome its own. `false`: one Enqueue per call.
   */
  coalesceEnqueues?: boolean;
  /**
   * Carry the calls on one session stream (default true): the same calls, errors and
   * deadlines at a fraction of a unary gRPC call's cost. `false`: each call is its own
   * unary call (as with a node that has no sessions, which the SDK notices by itself).
   */
  sessions?: boolean;
}

/** The answer to an enqueue. */
export interface TaskInfo {
  id: string;
  queue: string;
  state: TaskState;
  /** True when `taskId` named an existing task: nothing new was stored. */
  existed: boolean;
}

/** A completed task, as `waitForResult` answers. */
export interface TaskResult {
  task: TaskView;
  /** The handler's result bytes (empty when it returned nothing). */
  result: Uint8Array;
  /** The result as UTF-8 text. */
  text(): string;
  /** The result parsed as JSON (what a handler returning an object stored). */
  json<T = unknown>(): T;
}

/** How much longer than the node's wait a WaitTask call may take to be answered. */
const WAIT_CALL_MARGIN_MS = 10_000;

/**
 * Sends of coalesced enqueues in flight before later calls wait for one to return. One
 * (pure Nagle) phase-locks producers whose calls do not line up: 50 callers pausing 0-3
 * turns after each answer split into four groups that each waited for another's answer
 * (700 calls for 20,000 tasks, where two in flight made 425 and let answers arriving
 * together merge the groups again); an open loop (one call a turn) was as fast with two
 * as with one (13-15k/s, ~45 calls, against 3k/s and 20,000 calls with no wait at all).
 */
const COALESCE_IN_FLIGHT_MAX = 2;

/** A batch stays this far under the node's request size limit (framing, estimates). */
const BATCH_MAX_BYTES = REQUEST_MAX_BYTES - 64 * 1024;

/** About how many bytes a spec takes on the wire (strings counted at 3 bytes a character, the UTF-8 worst case). */
function specBytes(spec: TaskSpec): number {
  let chars = spec.type.length + spec.queue.length + spec.contentType.length + spec.uniqueKey.length + spec.taskId.length
    + spec.concurrencyKey.length + spec.group.length;
  for (const [k, v] of Object.entries(spec.metadata)) chars += k.length + v.length + 8;
  return spec.payload.byteLength + 3 * chars + 128;
}

/**
 * Splits items into consecutive chunks of at most BATCH_MAX items and BATCH_MAX_BYTES
 * (a single larger item goes alone: the node judges it).
 */
export function chunkSpecs<T>(items: readonly T[], specOf: (item: T) => TaskSpec): T[][] {
  const chunks: T[][] = [];
  let chunk: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = specBytes(specOf(item));
    if (chunk.length > 0 && (chunk.length >= BATCH_MAX || bytes + size > BATCH_MAX_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(item);
    bytes += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

export class Client {
  private readonly channel: RpcChannel;
  private readonly tasks: UnaryClient<typeof TaskService>;
  private readonly timeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly coalescer: EnqueueCoalescer<TaskSpec, TaskInfo> | undefined;
  private adminApi: Admin | undefined;
  /**
   * SDK calls ride out a short node restart instead of failing at once: each waits up to
   * connectTimeoutMs for a connection, then has timeoutMs to be answered.
   */
  private get callOptions() {
    return { timeoutMs: this.timeoutMs, waitForReady: true, connectTimeoutMs: this.connectTimeoutMs };
  }

  constructor(options: ClientOptions = {}) {
    const connection = connectTo(options, "Client");
    this.channel = connection.channel;
    this.connectTimeoutMs = connection.connectTimeoutMs;
    this.tasks = this.channel.service(TaskService, { session: options.sessions ?? true });
    this.timeoutMs = options.timeoutMs ?? 30_000;
    if (options.coalesceEnqueues ?? true) {
      this.coalescer = new EnqueueCoalescer<TaskSpec, TaskInfo>({
        one: (spec) => this.enqueueOne(spec),
        batch: (specs) => this.enqueueCoalesced(specs),
        refusedBeforeWork,
      }, { countMax: BATCH_MAX, bytesMax: BATCH_MAX_BYTES, bytesOf: specBytes, inFlightMax: COALESCE_IN_FLIGHT_MAX });
    }
  }

  /** Enqueues one task; resolves once it is durably stored. */
  enqueue(task: NewTaskSpec, options: EnqueueOptions = {}): Promise<TaskInfo> {
    let spec: TaskSpec;
    try {
      spec = toSpec(task, options);
    } catch (e) {
      return Promise.reject(new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", (e as Error).message));
    }
    return this.coalescer ? this.coalescer.add(spec) : this.enqueueOne(spec);
  }

  /** Enqueues many tasks in one call; each item succeeds or fails on its own. */
  async enqueueBatch(items: ReadonlyArray<{ task: NewTaskSpec; options?: EnqueueOptions }>): Promise<Array<TaskInfo | ConveyorError>> {
    const out: Array<TaskInfo | ConveyorError> = [];
    for (const chunk of chunkSpecs(items.map((it) => toSpec(it.task, it.options)), (spec) => spec)) {
      const res = await this.tasks.enqueueBatch({ tasks: chunk }, this.callOptions);
      for (const item of res.items) {
        out.push(item.outcome.case === "result"
          ? toInfo(item.outcome.value)
          : fromItemError(item.outcome.value));
      }
    }
    return out;
  }

  /** Enqueues up to 1000 tasks of one queue all-or-nothing. */
  async enqueueTx(items: ReadonlyArray<{ task: NewTaskSpec; options?: EnqueueOptions }>): Promise<TaskInfo[]> {
    const res = await this.tasks.enqueueTx({ tasks: items.map((it) => toSpec(it.task, it.options)) }, this.callOptions);
    return res.results.map(toInfo);
  }

  /** The task and its attempt history (oldest first, the last 25). */
  async getTask(id: string): Promise<TaskDetail> {
    return toTaskDetail(await this.tasks.getTask({ id }, this.callOptions));
  }

  async cancelTask(id: string): Promise<TaskView> {
    const res = await this.tasks.cancelTask({ id }, this.callOptions);
    return toTaskView(res.task!);
  }

  /**
   * Waits for a task to finish, without polling: the node answers when the task ends.
   * Resolves with the result when it completes; rejects with TaskFailedError when it
   * is archived or cancelled, with WaitTimeoutError when `timeout` passes first (default:
   * no limit), with NOT_FOUND for an unknown or deleted task. A finished task answers at once.
   */
  async waitForResult(id: string, options: { timeout?: Duration } = {}): Promise<TaskResult> {
    const timeoutMs = options.timeout === undefined ? Infinity
      : typeof options.timeout === "number" ? options.timeout : parseDurationMs(options.timeout);
    if (!(timeoutMs > 0)) throw new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `waitForResult: timeout must be positive (got ${String(options.timeout)})`, "timeout");
    const giveUpAt = Date.now() + timeoutMs;
    for (;;) {
      // One call waits at most WAIT_TASK_MAX_MS on the node; a longer wait calls again.
      const waitMs = Math.max(1, Math.min(WAIT_TASK_MAX_MS, Math.ceil(giveUpAt - Date.now())));
      const res = await this.tasks.waitTask({ id, timeoutMs: waitMs }, {
        timeoutMs: waitMs + WAIT_CALL_MARGIN_MS, waitForReady: true, connectTimeoutMs: this.connectTimeoutMs,
      });
      const task = toTaskView(res.task!);
      if (res.finished) {
        if (task.state !== "completed") throw new TaskFailedError(task);
        return resultOf(task);
      }
      if (Date.now() >= giveUpAt) throw new WaitTimeoutError(id, timeoutMs, task.state);
    }
  }

  /** The admin/inspector API over this client's connection. */
  get admin(): Admin {
    return (this.adminApi ??= new Admin({}, { channel: this.channel, callOptions: this.callOptions }));
  }

  close(): void {
    this.channel.close();
  }

  private async enqueueOne(spec: TaskSpec): Promise<TaskInfo> {
    return toInfo((await this.tasks.enqueue({ task: spec }, this.callOptions)).result!);
  }

  /** Coalesced calls as one EnqueueBatch: each item's outcome, as a single Enqueue would have given it. */
  private async enqueueCoalesced(specs: readonly TaskSpec[]): Promise<Array<TaskInfo | ConveyorError>> {
    const res = await this.tasks.enqueueBatch({ tasks: [...specs] }, this.callOptions);
    return res.items.map((item) => {
      if (item.outcome.case === "result") return toInfo(item.outcome.value);
      const e = fromItemError(item.outcome.value);
      // The batch names items as tasks[i]; a coalesced caller sent one task, so say "task".
      const task = (text: string) => text.replace(/^tasks\[\d+\]/, "task");
      return new ConveyorError(e.code, e.reason, task(e.message), e.field === undefined ? undefined : task(e.field), e.details ? { details: e.details } : undefined);
    });
  }
}

/**
 * Whole-call refusals of an EnqueueBatch made before any work: the guard (a token scoped
 * away from one item's queue, a role), the request's size and shape. They say nothing
 * about one item, so the coalescer sends each member again alone.
 */
function refusedBeforeWork(error: unknown): boolean {
  return error instanceof ConveyorError
    && (error.code === "INVALID_ARGUMENT" || error.code === "PERMISSION_DENIED" || error.code === "RESOURCE_EXHAUSTED");
}

function resultOf(task: TaskView): TaskResult {
  return {
    task, result: task.result,
    text: () => new TextDecoder().decode(task.result),
    json: <T>() => JSON.parse(new TextDecoder().decode(task.result)) as T,
  };
}

function toInfo(r: EnqueueResult): TaskInfo {
  return { id: r.id, queue: r.queue, state: stateName(r.state), existed: r.existed };
}
