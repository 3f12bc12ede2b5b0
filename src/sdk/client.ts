/**
 * The producer client. Concurrent `enqueue` calls made in the same event-loop turn are
 * coalesced into one EnqueueBatch RPC (a lone call goes out as a plain Enqueue), so a
 * producer with many calls in flight pays one round trip per turn, not per task.
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
import { TaskFailedError, WaitTimeoutError } from "./errors.js";

export interface ClientOptions extends ConnectionOptions {
  /** Deadline of each RPC once connected; default 30 s. */
  timeoutMs?: number;
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

interface Pending {
  spec: TaskSpec;
  resolve: (info: TaskInfo) => void;
  reject: (error: unknown) => void;
}

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
  private pending: Pending[] = [];
  private adminApi: Admin | undefined;
  private flushScheduled = false;
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
    this.tasks = this.channel.service(TaskService);
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Enqueues one task; resolves once it is durably stored. */
  enqueue(task: NewTaskSpec, options: EnqueueOptions = {}): Promise<TaskInfo> {
    let spec: TaskSpec;
    try {
      spec = toSpec(task, options);
    } catch (e) {
      return Promise.reject(new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", (e as Error).message));
    }
    return new Promise((resolve, reject) => {
      this.pending.push({ spec, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
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

  async getTask(id: string): Promise<TaskView> {
    const res = await this.tasks.getTask({ id }, this.callOptions);
    return toTaskView(res.task!);
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

  private flush(): void {
    this.flushScheduled = false;
    const pending = this.pending;
    this.pending = [];
    for (const chunk of chunkSpecs(pending, (p) => p.spec)) {
      if (chunk.length === 1) this.sendOne(chunk[0]!);
      else this.sendBatch(chunk);
    }
  }

  private sendOne(p: Pending): void {
    this.tasks.enqueue({ task: p.spec }, this.callOptions).then((r) => p.resolve(toInfo(r.result!)), p.reject);
  }

  private sendBatch(batch: Pending[]): void {
    this.tasks.enqueueBatch({ tasks: batch.map((p) => p.spec) }, this.callOptions).then(
      (res) => res.items.forEach((item, i) => {
        const p = batch[i]!;
        if (item.outcome.case === "result") p.resolve(toInfo(item.outcome.value));
        else {
          const e = fromItemError(item.outcome.value);
          // The batch names items as tasks[i]; a coalesced caller sent one task, so say "task".
          const task = (text: string) => text.replace(/^tasks\[\d+\]/, "task");
          p.reject(new ConveyorError(e.code, e.reason, task(e.message), e.field === undefined ? undefined : task(e.field)));
        }
      }),
      (error: unknown) => batch.forEach((p) => p.reject(error)),
    );
  }
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
