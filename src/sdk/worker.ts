/**
 * The worker: leases deliveries with a long poll, runs them through a Mux with a total
 * concurrency bound, heartbeats its leases at the server's interval, and settles
 * outcomes in batches.
 *
 * - One Lease call is in flight at a time per node polled, asking for free slots out of
 *   one shared budget; it parks on the node until work exists, so pickup needs no
 *   polling. In a cluster the worker polls each owner of its queues (lease-loops.ts).
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
 *   the rest (RELEASED: back to pending at once, no retry spent). By default SIGINT and
 *   SIGTERM do that (signals.ts) and then exit the process.
 * - While the node is unreachable the worker says so in its log, keeps retrying (the
 *   channel's reconnect backoff is capped, rpc/client.ts) and still stops at once.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { ConveyorError } from "../base/errors.js";
import { HEARTBEAT_LEASES_MAX, LEASE_QUEUES_MAX, SHUTDOWN_TIMEOUT_MS_DEFAULT, STOP_SETTLE_WAIT_MS, WAITING_LOG_INTERVAL_MS } from "../base/limits.js";
import { setLongTimeout } from "../base/long-timer.js";
import { Outcome as WireOutcome, WorkerService, type Delivery, type LeaseResponse, type Settlement } from "../gen/conveyor/v1/worker_service_pb.js";
import { retryPauseMs } from "./retry-pause.js";
import { SettleOutbox, settlement } from "./settle-outbox.js";
import type { RpcChannel } from "../rpc/client.js";
import type { UnaryClient } from "../rpc/service-definition.js";
import { connectTo, type ConnectionOptions } from "./connection.js";
import { stopOnSignals } from "./signals.js";
import { BatchError, isSkipRetry } from "./errors.js";
import { encodeResult, ruleToWire, type HandlerContext, type Mux } from "./mux.js";
import { toTaskView } from "./task.js";
import { LeaseLoops } from "./lease-loops.js";
import { stackOf } from "./error-stack.js";
import { failureLine, messageOf, secondsSince, silentLogger, startLine, stderrLogger, type WorkerLogger } from "./worker-log.js";

export type { WorkerLogger } from "./worker-log.js";

export interface WorkerOptions extends Pick<ConnectionOptions, "address" | "token" | "tls"> {
  mux: Mux;
  /**
   * Stop gracefully on SIGINT and SIGTERM, then exit the process (a second signal exits
   * at once); default true. Turn it off when embedding the worker: then call `stop()`.
   */
  handleSignals?: boolean;
  /** On stop, how long running handlers may finish before they are released; default 10 s. */
  shutdownTimeoutMs?: number;
  /** Where the worker logs waiting for its node, reconnecting and stopping; default stderr, null for none. */
  logger?: WorkerLogger | null;
  /** Queue names (weight 1 each) or a map of queue → weight. Default { default: 1 }. */
  queues?: readonly string[] | Record<string, number>;
  /** Deliveries run at once; default 10. */
  concurrency?: number;
  /** How long one Lease call parks on the server; default 30 s. */
  leaseWaitMs?: number;
  workerId?: string;
  /** Called for errors the worker handles itself (lost connection, failed settle). */
  onError?: (error: unknown, context: string) => void;
  /** Carry Lease, Heartbeat and Settle on one session stream per node (default true); see ClientOptions.sessions. */
  sessions?: boolean;
}

interface Running {
  delivery: Delivery;
  controller: AbortController;
  /** Set when the outcome must not be reported (lease lost, cancelled, timed out, released by stop). */
  abandoned: boolean;
}


export class Worker {
  readonly workerId: string;
  readonly address: string;
  private readonly channel: RpcChannel;
  private readonly log: WorkerLogger;
  private readonly shutdownTimeoutMs: number;
  private leaveSignals: (() => void) | undefined;
  private stopped: Promise<void> | undefined;
  private readonly rpc: UnaryClient<typeof WorkerService>;
  private readonly queues: Array<{ queue: string; weight: number }>;
  private readonly concurrency: number;
  private readonly leaseWaitMs: number;
  private readonly running = new Map<string, Running>();
  private readonly outbox: SettleOutbox;
  private stopping = false;
  /** Tasks settled (released ones not counted) and of those failed, for the stop line. */
  private tasksRun = 0;
  private tasksFailed = 0;
  private leaseAbort = new AbortController();
  private readonly loops: LeaseLoops;
  private heartbeatMs = 10_000;
  private cancelHeartbeat: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private drained: (() => void) | undefined;

  constructor(private readonly options: WorkerOptions) {
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    const connection = connectTo(options, "Worker");
    this.channel = connection.channel;
    this.address = connection.address;
    this.rpc = this.channel.service(WorkerService, { session: options.sessions ?? true });
    this.outbox = new SettleOutbox({
      send: (batch, draining) => this.rpc.settle({ workerId: this.workerId, settlements: batch, workerDraining: draining }, { timeoutMs: 30_000, waitForReady: true }),
      report: (error, context) => this.report(error, context),
    });
    this.log = options.logger === null ? silentLogger : options.logger ?? stderrLogger;
    this.shutdownTimeoutMs = options.shutdownTimeoutMs ?? SHUTDOWN_TIMEOUT_MS_DEFAULT;
    if (!Number.isFinite(this.shutdownTimeoutMs) || this.shutdownTimeoutMs < 0) {
      throw new Error(`Worker: shutdownTimeoutMs must be a non-negative number of milliseconds (got ${String(options.shutdownTimeoutMs)})`);
    }
    const q = options.queues ?? ["default"];
    this.queues = Array.isArray(q)
      ? q.map((queue) => ({ queue, weight: 1 }))
      : Object.entries(q).map(([queue, weight]) => ({ queue, weight }));
    if (this.queues.length === 0) throw new Error("Worker: name at least one queue");
    if (this.queues.length > LEASE_QUEUES_MAX) throw new Error(`Worker: at most ${LEASE_QUEUES_MAX} queues (got ${this.queues.length})`);
    this.concurrency = options.concurrency ?? 10;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new Error("Worker: concurrency must be a positive integer");
    this.leaseWaitMs = options.leaseWaitMs ?? 30_000;
    const mux = options.mux;
    this.loops = new LeaseLoops({
      workerId: this.workerId, queues: this.queues, concurrency: this.concurrency, leaseWaitMs: this.leaseWaitMs,
      base: { workerId: this.workerId, batchTypes: mux.batchTypes, types: mux.types, host: hostname(), concurrency: this.concurrency },
      main: { address: this.address, rpc: this.rpc },
      connect: (address) => connectTo({ ...options, address }, "Worker").channel, sessions: options.sessions ?? true,
      running: () => this.running.size,
      signal: this.leaseAbort.signal, log: this.log, report: (error, context) => this.report(error, context), pause: (ms) => this.pause(ms),
      deliver: (res) => this.deliver(res),
    });
  }

  /**
   * Resolves once the worker has registered its task types and their concurrency rules;
   * rejects with the server's error if the registration is refused (the worker then stops).
   */
  registered: Promise<void> = Promise.resolve();

  /** Registers the handled types, then leases in the background. */
  start(): this {
    if (this.loop) throw new Error("Worker already started");
    if (this.options.handleSignals ?? true) this.leaveSignals = stopOnSignals(this);
    const mux = this.options.mux;
    this.log.info(startLine({ address: this.address, queues: this.queues.map((q) => q.queue), concurrency: this.concurrency, types: mux.types, batchTypes: mux.batchTypes }));
    this.registered = this.register();
    this.registered.catch(() => {}); // reported through onError; awaiting it is optional
    this.loop = this.registered.then(() => this.loops.run(), (error: unknown) => {
      if (this.stopping) return;
      this.report(error, "register");
      this.log.warn(`registration refused by the node at ${this.address}: ${messageOf(error)}; stopping`);
      this.stopping = true;
      // Nothing left to stop gracefully: the process's signals get their default back.
      this.leaveSignals?.();
    });
    return this;
  }

  /**
   * Declares every handled type with its rules, first waiting for the node (as long as it
   * takes, saying so in the log). Rejects if the worker is stopped before it registered.
   */
  private async register(): Promise<void> {
    const mux = this.options.mux;
    const types = mux.types.map((type) => ({ type, concurrency: mux.rulesFor(type).map(ruleToWire) }));
    for (let attempt = 0; ; attempt++) {
      await this.untilConnected();
      if (this.stopping) throw new Error(`worker stopped before it reached the node at ${this.address}`);
      try {
        await this.rpc.registerTaskTypes({ workerId: this.workerId, types }, { timeoutMs: 10_000, signal: this.leaseAbort.signal });
        this.log.info(`registered with the node at ${this.address} as ${this.workerId}`);
        return;
      } catch (error) {
        if (this.stopping) throw new Error(`worker stopped before it reached the node at ${this.address}`);
        if (!(error instanceof ConveyorError) || error.code !== "UNAVAILABLE") throw error;
        this.report(error, "register");
        await this.pause(retryPauseMs(attempt));
      }
    }
  }

  /**
   * Waits for a connection to the node, logging at once when there is none and again
   * every WAITING_LOG_INTERVAL_MS. Returns early when the worker stops.
   */
  /**
   * Why a TLS channel does not connect, when the handshake is the reason: a readiness wait
   * never says, so one empty Heartbeat (it holds nothing, so it changes nothing) asks.
   */
  private async tlsFailure(): Promise<string | undefined> {
    try {
      await this.rpc.heartbeat({ workerId: this.workerId, leases: [] }, { timeoutMs: 2_000 });
    } catch (error) {
      if (error instanceof ConveyorError && error.reason === "TLS_FAILED") return error.message;
    }
    return undefined;
  }

  private async untilConnected(): Promise<void> {
    const since = Date.now();
    // The first wait is short so that a missing node is reported promptly.
    let waitMs = 1_000;
    while (!this.stopping) {
      if (await this.channel.waitReady(waitMs, this.leaseAbort.signal)) {
        if (waitMs !== 1_000) this.log.info(`connected to the node at ${this.address} after ${secondsSince(since)} s`);
        return;
      }
      if (this.stopping) return;
      const tls = this.options.tls ? await this.tlsFailure() : undefined;
      this.log.warn(`waiting for the node at ${this.address} (unreachable for ${secondsSince(since)} s${tls ? `: ${tls}` : ""}); retrying`);
      waitMs = WAITING_LOG_INTERVAL_MS;
    }
  }

  /** Sleeps `ms`, or less when the worker stops. */
  private pause(ms: number): Promise<void> {
    const signal = this.leaseAbort.signal;
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener("abort", done, { once: true });
    });
  }

  /** SIGINT/SIGTERM (signals.ts): a graceful stop with the configured shutdown timeout. */
  async stopForSignal(signal: NodeJS.Signals): Promise<void> {
    this.log.info(`${signal}: stopping`);
    await this.stop();
  }

  /** Handlers running now. */
  get inFlight(): number {
    return this.running.size;
  }

  /**
   * Graceful stop: no new leases; running handlers get `graceMs` (default the
   * `shutdownTimeoutMs` option) to finish, then the rest are aborted and released
   * without spending a retry. Outcomes go to the node before it resolves; if the node is
   * unreachable they are given up after STOP_SETTLE_WAIT_MS (their leases lapse and the
   * node retries those tasks: at-least-once).
   */
  stop(options: { graceMs?: number } = {}): Promise<void> {
    // A second call (e.g. the user's own signal handler beside ours) waits for the same stop.
    return (this.stopped ??= this.stopOnce(options));
  }

  private async stopOnce(options: { graceMs?: number }): Promise<void> {
    this.stopping = true;
    this.leaveSignals?.();
    this.leaseAbort.abort();
    await this.loop;
    const graceMs = options.graceMs ?? this.shutdownTimeoutMs;
    this.log.info(this.running.size > 0
      ? `draining: no new tasks; ${this.running.size} running get up to ${graceMs} ms to finish`
      : "draining: no new tasks; none running");
    if (this.running.size > 0) {
      await new Promise<void>((resolve) => {
        const cancelGrace = setLongTimeout(resolve, graceMs);
        this.drained = () => {
          cancelGrace();
          resolve();
        };
      });
    }
    let released = 0;
    for (const [leaseId, r] of this.running) {
      released += r.delivery.tasks.length;
      r.abandoned = true;
      r.controller.abort(new Error("worker stopping: task released"));
      this.outbox.hold(r.delivery.tasks.map((t) => settlement(r.delivery, t.id, WireOutcome.RELEASED, new Uint8Array(), "")));
      this.running.delete(leaseId);
    }
    // Always sent once the worker has leased, even with nothing to release: it also
    // fences off a Lease call of ours that may still reach the server after this point.
    if (this.loops.everLeased || this.outbox.hasQueued) {
      const settled = Promise.all([(async () => {
        await this.outbox.flush(true);
        await this.outbox.settled();
      })(), this.loops.fence()]);
      let cancelWait: (() => void) | undefined;
      await Promise.race([settled, new Promise<void>((resolve) => (cancelWait = setLongTimeout(resolve, STOP_SETTLE_WAIT_MS)))]);
      cancelWait?.();
      const unsent = this.outbox.callsInFlight;
      if (unsent > 0) this.log.warn(`the node at ${this.address} is unreachable: ${unsent} settle call(s) given up; the node retries those tasks when their leases lapse`);
    }
    this.cancelHeartbeat?.();
    this.cancelHeartbeat = undefined;
    this.outbox.close();
    this.loops.close();
    this.channel.close();
    this.log.info(`stopped: ${this.tasksRun} task(s) run, ${this.tasksFailed} failed${released > 0 ? `, ${released} released unfinished` : ""}`);
  }

  /** A Lease answer of any loop: its heartbeat interval, and its deliveries run. */
  private deliver(res: LeaseResponse): void {
    if (res.heartbeatIntervalMs > 0) this.heartbeatMs = res.heartbeatIntervalMs;
    const receivedAtMs = Date.now();
    for (const d of res.deliveries) this.run(d, attemptEndMs(d, res.leaseTtlMs, receivedAtMs));
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
        this.outbox.add(outcome);
        this.logOutcomes(delivery, outcome);
      }
      this.loops.slots.freed();
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
    for (const t of entry.delivery.tasks) {
      this.tasksFailed++;
      this.log.warn(failureLine(t, "attempt timed out (its deadline passed)", false));
    }
    this.loops.slots.freed();
    if (this.running.size === 0) this.drained?.();
  }

  /** A line per failed task (its type, id, attempt, error, what happens next); counts for the stop line. */
  private logOutcomes(delivery: Delivery, outcome: readonly Settlement[]): void {
    for (const s of outcome) {
      if (s.outcome === WireOutcome.RELEASED) continue;
      this.tasksRun++;
      if (s.outcome === WireOutcome.SUCCESS) continue;
      this.tasksFailed++;
      const task = delivery.tasks.find((t) => t.id === s.taskId);
      if (task) this.log.warn(failureLine(task, s.error, s.outcome === WireOutcome.SKIP_RETRY));
    }
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
      return [settlement(delivery, task.id, isSkipRetry(error) ? WireOutcome.SKIP_RETRY : WireOutcome.RETRY, new Uint8Array(), messageOf(error), stackOf(error))];
    }
  }

  /** A group batch: one call of the type's batch handler, one outcome per member. */
  private async executeBatch(delivery: Delivery, ctx: HandlerContext): Promise<Settlement[]> {
    const type = delivery.tasks[0]!.type;
    const handler = this.options.mux.batchHandlerFor(type);
    const all = (outcome: WireOutcome, error: string, stack = "") => delivery.tasks.map((t) => settlement(delivery, t.id, outcome, new Uint8Array(), error, stack));
    if (!handler) return all(WireOutcome.RETRY, `no batch handler registered for task type ${JSON.stringify(type)}`);
    try {
      await handler(delivery.tasks.map(toTaskView), ctx);
      return all(WireOutcome.SUCCESS, "");
    } catch (error) {
      if (!(error instanceof BatchError)) return all(isSkipRetry(error) ? WireOutcome.SKIP_RETRY : WireOutcome.RETRY, messageOf(error), stackOf(error));
      return delivery.tasks.map((t) => {
        if (!error.errors.has(t.id)) return settlement(delivery, t.id, WireOutcome.SUCCESS, new Uint8Array(), "");
        const memberError = error.errors.get(t.id);
        return settlement(delivery, t.id, isSkipRetry(memberError) ? WireOutcome.SKIP_RETRY : WireOutcome.RETRY, new Uint8Array(), messageOf(memberError), stackOf(memberError));
      });
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
        this.loops.slots.freed();
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

