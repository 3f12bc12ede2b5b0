/**
 * Long-poll leasing across queues. A Lease call first takes what its queues have now;
 * if nothing is dispatchable it parks as a waiter on each of its queues, and the first
 * grain that gets work (an enqueue, a promotion, a freed key slot, a release, a
 * resume) serves it directly: no poll interval anywhere. Waiters are bounded per node
 * (RESOURCE_EXHAUSTED when full) and always end by their wait bound.
 *
 * Queue weights pick the order in which a call's queues are tried, by weighted random
 * sampling (Efraimidis–Spirakis), so a queue of weight 6 is tried first about six
 * times as often as one of weight 1, and no queue is starved.
 */
import type { Clock } from "../../base/clock.js";
import { ConveyorError } from "../../base/errors.js";
import type { Random } from "../../base/random.js";
import type { LeasedDelivery, QueueGrain } from "../queue/queue-grain.js";
import type { LeaseCaps } from "../queue/ready-queues.js";
import { WORKER_GONE_AFTER_MS } from "../../base/limits.js";
import { WorkerRegistry } from "./worker-registry.js";

export interface LeaseQueue {
  name: string;
  weight: number;
}

export interface LeaseCall {
  /** The calling worker; a draining worker gets nothing. */
  workerId: string;
  /** The worker's host and total concurrency, as it reports them (for ListWorkers); unsaid when absent. */
  host?: string;
  concurrency?: number;
  queues: readonly LeaseQueue[];
  /** What the worker can run (its batch handlers). */
  caps: LeaseCaps;
  max: number;
  waitMs: number;
  /** Aborts a parked call (the client went away). */
  signal?: AbortSignal;
  /**
   * Called when the call, parked, is ended early because the partition of one of its
   * queues starts moving to another node (`releaseQueues`), so that its answer can say so
   * (LeaseResponse.relocated) and the worker call again at once.
   */
  onRelocated?: () => void;
}

interface Waiter {
  call: LeaseCall;
  resolve: (deliveries: LeasedDelivery[]) => void;
  reject: (error: unknown) => void;
  cancelTimer: () => void;
  done: boolean;
}

export interface LeaseBrokerOptions {
  /**
   * The grain of a queue this node owns. The broker works on local grains directly (not
   * through a QueueRef): a parked call is served synchronously in the microtask after the
   * turn that made work dispatchable, and taking-then-parking must not yield, or a wake
   * between the two would be lost. A Lease call for another node's queue is that node's
   * broker's to serve.
   */
  grainOf: (queue: string) => QueueGrain;
  /** Resolves once every write so far is durable for these queues (the node's group commit, and their partitions' changelog if any). */
  committed: (queues: readonly string[]) => Promise<void>;
  /**
   * Where the broker records the workers that call and the leases it hands them; the node
   * shares it with its services. Default: a registry of the broker's own.
   */
  workers?: WorkerRegistry;
  clock: Clock;
  random: Random;
  waitersMax: number;
  /** Deliveries in one answer, whatever a call asks for (it asks again for more); default unbounded. */
  answerMaxDeliveries?: number;
  /** Payload bytes in one answer: it stops growing once it holds this much (one delivery always goes). */
  answerMaxBytes?: number;
}

export class LeaseBroker {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private waiterCount = 0;
  private readonly serveScheduled = new Set<string>();
  /** Workers that announced a graceful stop, until when they are refused. */
  private readonly draining = new Map<string, number>();

  private readonly workers: WorkerRegistry;

  constructor(private readonly options: LeaseBrokerOptions) {
    this.workers = options.workers ?? new WorkerRegistry(options.clock, () => WORKER_GONE_AFTER_MS);
  }

  /**
   * Leases for a call, waiting up to its bound; resolves after the leases are committed,
   * with the ones whose lease is still running then.
   */
  async lease(call: LeaseCall): Promise<LeasedDelivery[]> {
    const deliveries = await this.leaseOrPark(call);
    this.workers.leased(call.workerId, deliveries);
    // Deliveries are durable (on the changelog too, where there is one) before they are returned.
    await this.options.committed(deliveries.map((d) => d.queue));
    // A lease that ran out while its delivery waited to be durable (the changelog without a
    // leader for longer than the lease) is not handed out: its lapse requeues the task,
    // which another call gets, so a worker would run it beside that second run. The
    // network fault test saw three tasks run twice 35 ms to 1.5 s apart that way.
    const nowMs = this.options.clock.nowMs();
    return deliveries.filter((d) => d.leaseExpiresAtMs > nowMs);
  }

  private async leaseOrPark(call: LeaseCall): Promise<LeasedDelivery[]> {
    if (this.isDraining(call.workerId)) return [];
    this.workers.sawLease({
      workerId: call.workerId, host: call.host ?? "", queues: call.queues.map((q) => q.name),
      batchTypes: call.caps.batchTypes, concurrency: call.concurrency ?? 0,
    });
    const now = this.take(call.queues, this.answerMax(call), call.caps, call.workerId);
    if (now.length > 0 || call.waitMs <= 0 || call.signal?.aborted) return now;
    if (this.waiterCount >= this.options.waitersMax) {
      throw new ConveyorError("RESOURCE_EXHAUSTED", "WAITERS_FULL",
        `too many parked lease calls on this node (${this.options.waitersMax}); retry later`);
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { call, resolve, reject, done: false, cancelTimer: () => {} };
      waiter.cancelTimer = this.options.clock.setTimer(call.waitMs, () => this.finish(waiter, []));
      call.signal?.addEventListener("abort", () => this.finish(waiter, []), { once: true });
      this.waiterCount += 1;
      this.workers.parked(call.workerId, 1);
      for (const q of call.queues) {
        let set = this.waiters.get(q.name);
        if (!set) this.waiters.set(q.name, (set = new Set()));
        set.add(waiter);
      }
    });
  }

  /** A grain may have work: serve its parked waiters once the current turn is over. */
  onReady(queue: string): void {
    if (!this.waiters.get(queue)?.size || this.serveScheduled.has(queue)) return;
    this.serveScheduled.add(queue);
    queueMicrotask(() => {
      this.serveScheduled.delete(queue);
      this.serve(queue);
    });
  }

  /**
   * A worker is stopping: its parked calls end empty and its calls for the next
   * `forMs` get nothing. Called before its released tasks are applied, so a Lease call
   * of that worker still in flight can never take them back.
   */
  drain(workerId: string, forMs: number): void {
    const nowMs = this.options.clock.nowMs();
    for (const [id, untilMs] of this.draining) if (untilMs <= nowMs) this.draining.delete(id);
    this.draining.set(workerId, nowMs + forMs);
    this.workers.forget(workerId);
    for (const set of [...this.waiters.values()]) {
      for (const w of [...set]) if (w.call.workerId === workerId) this.finish(w, []);
    }
  }

  /** The worker started again (it registered): lift its drain fence. */
  undrain(workerId: string): void {
    this.draining.delete(workerId);
  }

  private isDraining(workerId: string): boolean {
    const untilMs = this.draining.get(workerId);
    return untilMs !== undefined && untilMs > this.options.clock.nowMs();
  }

  /** True while parked calls wait on `queue` (its grain must stay in memory). */
  isPinned(queue: string): boolean {
    return (this.waiters.get(queue)?.size ?? 0) > 0;
  }

  get parked(): number {
    return this.waiterCount;
  }

  /**
   * Ends, with no work, every parked call waiting on a queue `moving` names (its
   * partition is moving to another node), telling each it was relocated: the worker polls
   * again at once and is routed to the new owner. A predicate, not a list of the
   * partition's queues: a worker may be parked on a queue that has no rows yet.
   */
  releaseQueues(moving: (queue: string) => boolean): void {
    for (const [queue, set] of [...this.waiters]) {
      if (!moving(queue)) continue;
      for (const w of [...set]) {
        if (!w.done) w.call.onRelocated?.();
        this.finish(w, []);
      }
    }
  }

  /** Ends every parked call with no work (node shutdown). */
  releaseAll(): void {
    for (const set of [...this.waiters.values()]) for (const w of [...set]) this.finish(w, []);
  }

  /**
   * Ends every parked call with `error` (a retryable refusal): this node may no longer
   * serve the queues they wait on (it fenced itself), so the callers must ask again,
   * wherever those queues are served then.
   */
  refuseAll(error: ConveyorError): void {
    for (const set of [...this.waiters.values()]) for (const w of [...set]) this.finish(w, [], error);
  }

  /**
   * Runs in a microtask, outside any call's promise chain: whatever fails here is the
   * parked calls' answer, never an exception of the process. The grain is reached only
   * while this node holds the queue; a node that woke from a pause past its member TTL
   * (its grain's timer fired before anything else ran) holds nothing, and its parked
   * calls are refused with the router's retryable reason (FENCED, WRONG_OWNER).
   */
  private serve(queue: string): void {
    const set = this.waiters.get(queue);
    if (!set) return;
    let grain: QueueGrain;
    try {
      grain = this.options.grainOf(queue);
    } catch (error) {
      for (const waiter of [...set]) this.finish(waiter, [], error);
      return;
    }
    for (const waiter of [...set]) {
      try {
        if (!grain.hasDispatchable(waiter.call.caps)) continue;
        const deliveries = grain.lease(this.answerMax(waiter.call), waiter.call.caps, this.options.answerMaxBytes ?? Infinity, waiter.call.workerId);
        if (deliveries.length > 0) this.finish(waiter, deliveries);
      } catch (error) {
        // A failed turn (storage refused the write): nothing was leased; this call hears why.
        this.finish(waiter, [], error);
      }
    }
  }

  private answerMax(call: LeaseCall): number {
    return Math.min(call.max, this.options.answerMaxDeliveries ?? Infinity);
  }

  /**
   * What the call's queues have now, in weighted order. Each queue gets the bytes left
   * in the answer's budget, so the answer passes the budget at most once, by at most one
   * delivery.
   */
  private take(queues: readonly LeaseQueue[], max: number, caps: LeaseCaps, workerId: string): LeasedDelivery[] {
    const out: LeasedDelivery[] = [];
    const budget = this.options.answerMaxBytes ?? Infinity;
    let bytes = 0;
    for (const q of this.weightedOrder(queues)) {
      if (out.length >= max || bytes >= budget) break;
      for (const d of this.options.grainOf(q.name).lease(max - out.length, caps, budget - bytes, workerId)) {
        out.push(d);
        for (const t of d.tasks) bytes += t.payload.byteLength;
      }
    }
    return out;
  }

  private weightedOrder(queues: readonly LeaseQueue[]): LeaseQueue[] {
    if (queues.length <= 1) return [...queues];
    const { random } = this.options;
    return queues
      .map((q) => ({ q, key: -Math.log(1 - random.next()) / Math.max(q.weight, 1e-9) }))
      .sort((a, b) => a.key - b.key)
      .map((x) => x.q);
  }

  private finish(waiter: Waiter, deliveries: LeasedDelivery[], error?: unknown): void {
    if (waiter.done) return;
    waiter.done = true;
    waiter.cancelTimer();
    this.waiterCount -= 1;
    this.workers.parked(waiter.call.workerId, -1);
    for (const q of waiter.call.queues) {
      const set = this.waiters.get(q.name);
      set?.delete(waiter);
      if (set?.size === 0) this.waiters.delete(q.name);
    }
    if (error === undefined) waiter.resolve(deliveries);
    else waiter.reject(error);
  }
}
