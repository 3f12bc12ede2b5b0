/**
 * A worker's outcomes on their way to the node. Handlers finishing in the same turn are
 * sent together after it, in as few Settle calls as the node's bounds allow (count and
 * size); a call is retried while the node is unreachable, and an item the node refused
 * UNAVAILABLE is sent again, for at most SETTLE_RETRY_FOR_MS: by then the lease has lapsed
 * and the node retries the task anyway (at-least-once). Dropping such an item instead
 * would leave a finished task active until its lease lapsed, then run it again. Every
 * call in flight is tracked, so a stopping worker can wait for exactly those calls
 * instead of polling a counter.
 */
import { ConveyorError } from "../base/errors.js";
import { ERROR_MESSAGE_MAX_BYTES, REQUEST_MAX_BYTES, RESULT_MAX_BYTES, SETTLEMENTS_MAX, truncateBytes, truncateText } from "../base/limits.js";
import type { Delivery, Outcome, Settlement, SettleResponse } from "../gen/conveyor/v1/worker_service_pb.js";
import { fromItemError } from "../rpc/status.js";
import { retryPauseMs } from "./retry-pause.js";

/** A Settle call stays this far under the node's request size limit. */
const SETTLE_MAX_BYTES = REQUEST_MAX_BYTES - 64 * 1024;
/** How long a settle keeps being retried while the node is unreachable. */
const SETTLE_RETRY_FOR_MS = 60_000;

export interface SettleOutboxDeps {
  /** One Settle call; `draining` tells the node the worker is stopping (it fences the worker first). */
  send(batch: Settlement[], draining: boolean): Promise<SettleResponse>;
  /** Errors the outbox handles itself (a refused item, a failed call). */
  report(error: unknown, context: string): void;
}

export class SettleOutbox {
  private readonly queued: Settlement[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private flushScheduled = false;
  private closed = false;

  constructor(private readonly deps: SettleOutboxDeps) {}

  /** Queues outcomes and sends them after the current turn (with any others of the turn). */
  add(items: readonly Settlement[]): void {
    this.queued.push(...items);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flush();
    });
  }

  /** Queues outcomes to go with the next `flush` (a stopping worker's releases). */
  hold(items: readonly Settlement[]): void {
    this.queued.push(...items);
  }

  get hasQueued(): boolean {
    return this.queued.length > 0;
  }

  /** Settle calls not yet answered (or given up). */
  get callsInFlight(): number {
    return this.inFlight.size;
  }

  /**
   * Sends everything queued. When draining, a call goes even with nothing in it, and
   * every call says so (fencing twice is harmless).
   */
  async flush(draining = false): Promise<void> {
    if (this.queued.length === 0 && !draining) return;
    const batches = chunkSettlements(this.queued.splice(0, this.queued.length));
    if (batches.length === 0) batches.push([]);
    await Promise.all(batches.map((batch) => this.track(this.sendWithRetry(batch, draining))));
  }

  /** Resolves once no Settle call is in flight, including calls started while waiting. */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Stops retrying (the worker's channel is closing). */
  close(): void {
    this.closed = true;
  }

  private track(call: Promise<void>): Promise<void> {
    this.inFlight.add(call);
    return call.finally(() => this.inFlight.delete(call));
  }

  /**
   * Sends `batch` until every item is answered for good: the whole call again while the
   * node is unreachable, and the items refused UNAVAILABLE again (their partition's log
   * did not acknowledge the commit, or the partition was changing hands). A settle sent
   * again is idempotent by lease, so an item whose first commit did land is answered OK.
   */
  private async sendWithRetry(batch: Settlement[], draining: boolean): Promise<void> {
    const giveUpAt = Date.now() + SETTLE_RETRY_FOR_MS;
    let pending = batch;
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await this.deps.send(pending, draining);
        const again: Settlement[] = [];
        res.results.forEach((r, i) => {
          if (!r.error) return;
          const error = fromItemError(r.error);
          this.deps.report(error, "settle");
          if (error.code === "UNAVAILABLE" && pending[i]) again.push(pending[i]);
        });
        if (again.length === 0) return;
        pending = again;
      } catch (error) {
        this.deps.report(error, "settle");
        if (!(error instanceof ConveyorError) || error.code !== "UNAVAILABLE") return;
      }
      if (this.closed || Date.now() >= giveUpAt) return;
      await new Promise<void>((resolve) => setTimeout(resolve, retryPauseMs(attempt)));
    }
  }
}

/**
 * One outcome of a delivery's task. The node keeps a result or error over its limit
 * truncated; cutting it here saves sending it. `stack`: a failure's (error-stack.ts).
 */
export function settlement(d: Delivery, taskId: string, outcome: Outcome, result: Uint8Array, error: string, stack = ""): Settlement {
  return {
    $typeName: "conveyor.v1.Settlement", queue: d.queue, leaseId: d.leaseId, taskId, outcome,
    result: truncateBytes(result, RESULT_MAX_BYTES), error: truncateText(error, ERROR_MESSAGE_MAX_BYTES), stack,
  };
}

/** About how many bytes a settlement takes on the wire (the error counted at 3 bytes a character). */
const settlementBytes = (s: Settlement) => s.result.byteLength + 3 * (s.error.length + s.stack.length + s.queue.length + s.leaseId.length + s.taskId.length) + 32;

/** Outcomes in consecutive calls of at most SETTLEMENTS_MAX items and SETTLE_MAX_BYTES. */
export function chunkSettlements(items: readonly Settlement[]): Settlement[][] {
  const chunks: Settlement[][] = [];
  let chunk: Settlement[] = [];
  let bytes = 0;
  for (const s of items) {
    const size = settlementBytes(s);
    if (chunk.length > 0 && (chunk.length >= SETTLEMENTS_MAX || bytes + size > SETTLE_MAX_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(s);
    bytes += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}
