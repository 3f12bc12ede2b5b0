/**
 * The producer client. Concurrent `enqueue` calls made in the same event-loop turn are
 * coalesced into one EnqueueBatch RPC (a lone call goes out as a plain Enqueue), so a
 * producer with many calls in flight pays one round trip per turn, not per task.
 */
import { ConveyorError } from "../base/errors.js";
import { BATCH_MAX, REQUEST_MAX_BYTES } from "../base/limits.js";
import { TaskService } from "../gen/conveyor/v1/task_service_pb.js";
import type { EnqueueResult, TaskSpec } from "../gen/conveyor/v1/task_pb.js";
import { fromItemError } from "../rpc/status.js";
import { DEFAULT_ADDRESS, RpcChannel } from "../rpc/client.js";
import { channelSecurity, type ConnectionSecurityOptions } from "./connection-security.js";
import type { UnaryClient } from "../rpc/service-definition.js";
import { stateName, toSpec, toTaskView, type EnqueueOptions, type NewTaskSpec, type TaskState, type TaskView } from "./task.js";

export interface ClientOptions extends ConnectionSecurityOptions {
  /** host:port; default $CONVEYOR_SERVER or 127.0.0.1:7233. */
  address?: string;
  /** Deadline of each RPC; default 30 s. */
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

export const defaultAddress = () => process.env.CONVEYOR_SERVER || DEFAULT_ADDRESS;

export class Client {
  private readonly channel: RpcChannel;
  private readonly tasks: UnaryClient<typeof TaskService>;
  private readonly timeoutMs: number;
  private pending: Pending[] = [];
  private flushScheduled = false;
  /** SDK calls ride out a node restart (up to their deadline) instead of failing at once. */
  private get callOptions() {
    return { timeoutMs: this.timeoutMs, waitForReady: true };
  }

  constructor(options: ClientOptions = {}) {
    this.channel = new RpcChannel({ address: options.address ?? defaultAddress(), ...channelSecurity(options) });
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

function toInfo(r: EnqueueResult): TaskInfo {
  return { id: r.id, queue: r.queue, state: stateName(r.state), existed: r.existed };
}
