/**
 * The worker: leases deliveries with a long poll, runs them through a Mux with a total
 * concurrency bound, heartbeats its leases at the server's interval, and settles
 * outcomes in batches.
 *
 * - One Lease call is in flight at a time, asking for as many deliveries as there are
 *   free slots; it parks on the server until work exists, so pickup needs no polling.
 * - Outcomes finished in the same event-loop turn go out in one Settle call.
 * - A lost lease, a cancel request, the attempt's end or `stop()` abort the handler's
 *   AbortSignal. A lost, cancelled or timed-out attempt is not settled (the server has
 *   moved on); a settle that cannot reach the server is retried until it does or the
 *   lease lapses (then the server retries the task: at-least-once).
 * - The attempt's end (its timeout or the task's deadline) is enforced by the node,
 *   which fails the attempt then. The worker mirrors it: at the end it aborts the signal,
 *   stops waiting for the handler, frees the slot (it can lease more) and ignores
 *   whatever the handler returns later. It measures the end from the time the node had
 *   left when it leased the delivery, so clock skew cannot make it give up first.
 * - `stop()` stops leasing, waits up to `graceMs` for running handlers, then releases
 *   the rest (RELEASED: back to pending at once, no retry spent).
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { ConveyorError } from "../base/errors.js";
import {
  BATCH_MAX, ERROR_MESSAGE_MAX_BYTES, HEARTBEAT_LEASES_MAX, LEASE_QUEUES_MAX, REQUEST_MAX_BYTES, RESULT_MAX_BYTES, SETTLEMENTS_MAX,
  truncateBytes, truncateText,
} from "../base/limits.js";
import { setLongTimeout } from "../base/long-timer.js";
import { Outcome as WireOutcome, WorkerService, type Delivery, type Settlement } from "../gen/conveyor/v1/worker_service_pb.js";
import { RpcChannel } from "../rpc/client.js";
import { channelSecurity, type ConnectionSecurityOptions } from "./connection-security.js";
import type { UnaryClient } from "../rpc/service-definition.js";
import { defaultAddress } from "./client.js";
import { BatchError, isSkipRetry } from "./errors.js";
import { encodeResult, type ConcurrencyRuleSpec, type HandlerContext, type Mux } from "./mux.js";
import { fromItemError } from "../rpc/status.js";
import { LEASE_CALL_IN_FLIGHT_MARGIN_MS } from "../base/lease-timing.js";
import { strategyToWire } from "../rpc/wire-names.js";
import { toTaskView } from "./task.js";

export interface WorkerOptions extends ConnectionSecurityOptions {
  mux: Mux;
  /** host:port; default $CONVEYOR_SERVER or 127.0.0.1:7233. */
  address?: string;
  /** Queue names (weight 1 each) or a map of queue → weight. Default { default: 1 }. */
  queues?: readonly string[] | Record<string, number>;
  /** Deliveries run at once; default 10. */
  concurrency?: number;
  /** How long one Lease call parks on the server; default 30 s. */
  leaseWaitMs?: number;
  workerId?: string;
  /** Called for errors the worker handles itself (lost connection, failed settle). */
  onError?: (error: unknown, context: string) => void;
}

interface Running {
  delivery: Delivery;
  controller: AbortController;
  /** Set when the outcome must not be reported (lease lost, cancelled, timed out, released by stop). */
  abandoned: boolean;
}

const RECONNECT_BASE_MS = 100;
/** A Settle call stays this far under the node's request size limit. */
const SETTLE_MAX_BYTES = REQUEST_MAX_BYTES - 64 * 1024;
const RECONNECT_MAX_MS = 5_000;

export class Worker {
  readonly workerId: string;
  private readonly channel: RpcChannel;
  private readonly rpc: UnaryClient<typeof WorkerService>;
  private readonly queues: Array<{ queue: string; weight: number }>;
  private readonly concurrency: number;
  private readonly leaseWaitMs: number;
  private readonly running = new Map<string, Running>();
  private readonly outbox: Settlement[] = [];
  private flushScheduled = false;
  private settling = 0;
  private stopping = false;
  private leaseAbort = new AbortController();
  private slotFreed: (() => void) | undefined;
  private heartbeatMs = 10_000;
  private cancelHeartbeat: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private drained: (() => void) | undefined;

  constructor(private readonly options: WorkerOptions) {
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.channel = new RpcChannel({ address: options.address ?? defaultAddress(), ...channelSecurity(options) });
    this.rpc = this.channel.service(WorkerService);
    const q = options.queues ?? ["default"];
    this.queues = Array.isArray(q)
      ? q.map((queue) => ({ queue, weight: 1 }))
      : Object.entries(q).map(([queue, weight]) => ({ queue, weight }));
    if (this.queues.length === 0) throw new Error("Worker: name at least one queue");
    if (this.queues.length > LEASE_QUEUES_MAX) throw new Error(`Worker: at most ${LEASE_QUEUES_MAX} queues (got ${this.queues.length})`);
    this.concurrency = options.concurrency ?? 10;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new Error("Worker: concurrency must be a positive integer");
    this.leaseWaitMs = options.leaseWaitMs ?? 30_000;
  }

  /**
   * Resolves once the worker has registered its task types and their concurrency rules;
   * rejects with the server's error if the registration is refused (the worker then stops).
   */
  registered: Promise<void> = Promise.resolve();

  /** Registers the handled types, then leases in the background. */
  start(): this {
    if (this.loop) throw new Error("Worker already started");
    this.registered = this.register();
    this.registered.catch(() => {}); // reported through onError; awaiting it is optional
    this.loop = this.registered.then(() => this.leaseLoop(), (error: unknown) => {
      this.report(error, "register");
      this.stopping = true;
    });
    return this;
  }

  /** Declares every handled type with its rules (retried while the server is unreachable). */
  private async register(): Promise<void> {
    const mux = this.options.mux;
    const types = mux.types.map((type) => ({ type, concurrency: mux.rulesFor(type).map(ruleToWire) }));
    for (let attempt = 0; ; attempt++) {
      try {
        await this.rpc.registerTaskTypes({ workerId: this.workerId, types }, { timeoutMs: 10_000 });
        return;
      } catch (error) {
        if (this.stopping || !(error instanceof ConveyorError) || error.code !== "UNAVAILABLE") throw error;
        this.report(error, "register");
        await sleep(jitter(Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** Math.min(attempt, 10))));
      }
    }
  }

  /** Handlers running now. */
  get inFlight(): number {
    return this.running.size;
  }

  /**
   * Graceful stop: no new leases; running handlers get `graceMs` to finish, then the
   * rest are aborted and released without spending a retry.
   */
  async stop(options: { graceMs?: number } = {}): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.leaseAbort.abort();
    this.slotFreed?.();
    await this.loop;
    if (this.running.size > 0) {
      await new Promise<void>((resolve) => {
        const cancelGrace = setLongTimeout(resolve, options.graceMs ?? 10_000);
        this.drained = () => {
          cancelGrace();
          resolve();
        };
      });
    }
    for (const [leaseId, r] of this.running) {
      r.abandoned = true;
      r.controller.abort(new Error("worker stopping: task released"));
      for (const t of r.delivery.tasks) {
        this.outbox.push(settlement(r.delivery, t.id, WireOutcome.RELEASED, new Uint8Array(), ""));
      }
      this.running.delete(leaseId);
    }
    // Always sent, even with nothing to release: it also fences off a Lease call of
    // ours that may still reach the server after this point.
    await this.flushSettles(true);
    while (this.settling > 0) await new Promise((resolve) => setImmediate(resolve));
    this.cancelHeartbeat?.();
    this.cancelHeartbeat = undefined;
    this.channel.close();
  }

  private async leaseLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      const free = this.concurrency - this.running.size;
      if (free <= 0) {
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        this.slotFreed = undefined;
        continue;
      }
      try {
        const calledAt = Date.now();
        const res = await this.rpc.lease(
          { workerId: this.workerId, queues: this.queues, maxDeliveries: Math.min(free, BATCH_MAX), waitMs: this.leaseWaitMs, batchTypes: this.options.mux.batchTypes },
          { timeoutMs: this.leaseWaitMs + LEASE_CALL_IN_FLIGHT_MARGIN_MS, signal: this.leaseAbort.signal, waitForReady: true },
        );
        failures = 0;
        if (res.heartbeatIntervalMs > 0) this.heartbeatMs = res.heartbeatIntervalMs;
        // An empty answer at once means no wait was possible (a zero leaseWaitMs, or the
        // server still fences a previous run of this worker id): back off, do not spin.
        if (res.deliveries.length === 0 && Date.now() - calledAt < 50) {
          await sleep(jitter(RECONNECT_BASE_MS));
        }
        const receivedAtMs = Date.now();
        for (const d of res.deliveries) this.run(d, attemptEndMs(d, res.leaseTtlMs, receivedAtMs));
        // Let handlers that finish at once free their slots first, so the next Lease
        // asks for every free slot (fewer, fuller round trips).
        if (res.deliveries.length > 0) await new Promise((resolve) => setImmediate(resolve));
      } catch (error) {
        if (this.stopping) break;
        this.report(error, "lease");
        failures += 1;
        await sleep(jitter(Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** Math.min(failures, 10))));
      }
    }
  }

  /** Runs a delivery whose attempt ends at `endsAtMs` on this process's clock (0: no end). */
  private run(delivery: Delivery, endsAtMs: number): void {
    const controller = new AbortController();
    const entry: Running = { delivery, controller, abandoned: false };
    this.running.set(delivery.leaseId, entry);
    this.armHeartbeat();
    // An end weeks ahead is beyond setTimeout's limit: setLongTimeout arms it in steps.
    const cancelEnd = endsAtMs > 0 ? setLongTimeout(() => this.endAttempt(entry), endsAtMs - Date.now()) : undefined;
    void this.execute(delivery, controller.signal, endsAtMs).then((outcome) => {
      cancelEnd?.();
      if (!entry.abandoned) {
        this.running.delete(delivery.leaseId);
        this.outbox.push(...outcome);
        this.scheduleFlush();
      }
      this.slotFreed?.();
      if (this.running.size === 0) this.drained?.();
    });
  }

  /**
   * The attempt's end: the node fails the attempt now, whatever the handler does. Abort
   * its signal, stop waiting for it, settle nothing for this lease, free its slot.
   */
  private endAttempt(entry: Running): void {
    if (entry.abandoned || this.running.get(entry.delivery.leaseId) !== entry) return;
    entry.abandoned = true;
    this.running.delete(entry.delivery.leaseId);
    entry.controller.abort(new Error("attempt timed out: its deadline passed, the node has failed this attempt"));
    this.slotFreed?.();
    if (this.running.size === 0) this.drained?.();
  }

  /** Runs the handler and turns its return or throw into settlements. */
  private async execute(delivery: Delivery, signal: AbortSignal, endsAtMs: number): Promise<Settlement[]> {
    const ctx = { signal, deadline: endsAtMs > 0 ? new Date(endsAtMs) : undefined, leaseId: delivery.leaseId };
    if (delivery.batch) return this.executeBatch(delivery, ctx);
    const task = delivery.tasks[0]!;
    const handler = this.options.mux.handlerFor(task.type);
    if (!handler) {
      return [settlement(delivery, task.id, WireOutcome.RETRY, new Uint8Array(), `no handler registered for task type ${JSON.stringify(task.type)}`)];
    }
    try {
      const value = await handler(toTaskView(task), ctx);
      return [settlement(delivery, task.id, WireOutcome.SUCCESS, encodeResult(value), "")];
    } catch (error) {
      return [settlement(delivery, task.id, isSkipRetry(error) ? WireOutcome.SKIP_RETRY : WireOutcome.RETRY, new Uint8Array(), messageOf(error))];
    }
  }

  /** A group batch: one call of the type's batch handler, one outcome per member. */
  private async executeBatch(delivery: Delivery, ctx: HandlerContext): Promise<Settlement[]> {
    const type = delivery.tasks[0]!.type;
    const handler = this.options.mux.batchHandlerFor(type);
    const all = (outcome: WireOutcome, error: string) => delivery.tasks.map((t) => settlement(delivery, t.id, outcome, new Uint8Array(), error));
    if (!handler) return all(WireOutcome.RETRY, `no batch handler registered for task type ${JSON.stringify(type)}`);
    try {
      await handler(delivery.tasks.map(toTaskView), ctx);
      return all(WireOutcome.SUCCESS, "");
    } catch (error) {
      if (!(error instanceof BatchError)) return all(isSkipRetry(error) ? WireOutcome.SKIP_RETRY : WireOutcome.RETRY, messageOf(error));
      return delivery.tasks.map((t) => {
        if (!error.errors.has(t.id)) return settlement(delivery, t.id, WireOutcome.SUCCESS, new Uint8Array(), "");
        const memberError = error.errors.get(t.id);
        return settlement(delivery, t.id, isSkipRetry(memberError) ? WireOutcome.SKIP_RETRY : WireOutcome.RETRY, new Uint8Array(), messageOf(memberError));
      });
    }
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flushSettles();
    });
  }

  /**
   * Sends every queued outcome, in as few calls as the node's bounds allow (count and
   * size); retries while the server is unreachable. When draining, every call says so
   * (the node fences the worker before applying that call's releases; fencing twice is
   * harmless).
   */
  private async flushSettles(draining = false): Promise<void> {
    if (this.outbox.length === 0 && !draining) return;
    const batches = chunkSettlements(this.outbox.splice(0, this.outbox.length));
    if (batches.length === 0) batches.push([]);
    await Promise.all(batches.map((batch) => this.sendSettles(batch, draining)));
  }

  private async sendSettles(batch: Settlement[], draining: boolean): Promise<void> {
    this.settling += 1;
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          const res = await this.rpc.settle({ workerId: this.workerId, settlements: batch, workerDraining: draining }, { timeoutMs: 30_000, waitForReady: true });
          for (const r of res.results) if (r.error) this.report(fromItemError(r.error), "settle");
          return;
        } catch (error) {
          this.report(error, "settle");
          if (!(error instanceof ConveyorError) || error.code !== "UNAVAILABLE" || attempt >= 20) return;
          await sleep(jitter(Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** attempt)));
        }
      }
    } finally {
      this.settling -= 1;
    }
  }

  private armHeartbeat(): void {
    if (this.cancelHeartbeat || this.running.size === 0) return;
    this.cancelHeartbeat = setLongTimeout(() => {
      this.cancelHeartbeat = undefined;
      void this.heartbeat().finally(() => this.armHeartbeat());
    }, this.heartbeatMs);
  }

  private async heartbeat(): Promise<void> {
    const leases = [...this.running.values()].map((r) => ({ queue: r.delivery.queue, leaseId: r.delivery.leaseId }));
    const chunks: Array<typeof leases> = [];
    for (let i = 0; i < leases.length; i += HEARTBEAT_LEASES_MAX) chunks.push(leases.slice(i, i + HEARTBEAT_LEASES_MAX));
    await Promise.all(chunks.map((chunk) => this.heartbeatChunk(chunk)));
  }

  private async heartbeatChunk(leases: Array<{ queue: string; leaseId: string }>): Promise<void> {
    try {
      const res = await this.rpc.heartbeat({ workerId: this.workerId, leases }, { timeoutMs: this.heartbeatMs });
      for (const status of res.leases) {
        if (status.held && !status.cancelRequested) continue;
        const r = this.running.get(status.leaseId);
        if (!r) continue;
        r.abandoned = true;
        this.running.delete(status.leaseId);
        r.controller.abort(new Error(status.cancelRequested ? `task cancelled (${status.cancelReason})` : "lease lost"));
        this.slotFreed?.();
      }
    } catch (error) {
      this.report(error, "heartbeat");
    }
  }

  private report(error: unknown, context: string): void {
    this.options.onError?.(error, context);
  }
}

/**
 * When a delivery's attempt ends on this process's clock (0: no end). The node leased it
 * at `lease_expires_at_ms - lease_ttl_ms` on its own clock; the time it had left then,
 * counted from when the answer arrived here, ends a little after the node's instant
 * whatever the skew between the clocks (the node decides; the worker never gives up
 * first). Without a TTL in the answer, the node's instant is taken as it is.
 * Exported for tests; not part of the package's API (src/index.ts).
 */
export function attemptEndMs(d: Pick<Delivery, "deadlineAtMs" | "leaseExpiresAtMs">, leaseTtlMs: number, receivedAtMs: number): number {
  const deadlineMs = Number(d.deadlineAtMs);
  if (deadlineMs <= 0) return 0;
  if (leaseTtlMs <= 0) return deadlineMs;
  const leasedAtMs = Number(d.leaseExpiresAtMs) - leaseTtlMs;
  return receivedAtMs + Math.max(0, deadlineMs - leasedAtMs);
}

/** About how many bytes a settlement takes on the wire (the error counted at 3 bytes a character). */
const settlementBytes = (s: Settlement) => s.result.byteLength + 3 * (s.error.length + s.queue.length + s.leaseId.length + s.taskId.length) + 32;

/** Outcomes in consecutive calls of at most SETTLEMENTS_MAX items and SETTLE_MAX_BYTES. */
function chunkSettlements(items: readonly Settlement[]): Settlement[][] {
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

/** The node keeps a result or error over its limit truncated; cutting it here saves sending it. */
function settlement(d: Delivery, taskId: string, outcome: WireOutcome, result: Uint8Array, error: string): Settlement {
  return {
    $typeName: "conveyor.v1.Settlement", queue: d.queue, leaseId: d.leaseId, taskId, outcome,
    result: truncateBytes(result, RESULT_MAX_BYTES), error: truncateText(error, ERROR_MESSAGE_MAX_BYTES),
  };
}

function ruleToWire(r: ConcurrencyRuleSpec) {
  return {
    name: r.name ?? "", expression: r.expression,
    maxRuns: typeof r.maxRuns === "number" ? r.maxRuns : 0,
    maxRunsExpression: typeof r.maxRuns === "string" ? r.maxRuns : "",
    strategy: strategyToWire(r.limitStrategy),
  };
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
const jitter = (ms: number) => ms / 2 + Math.random() * (ms / 2);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
