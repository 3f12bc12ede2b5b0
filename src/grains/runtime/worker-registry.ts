/**
 * The workers a node has heard from: what each leases from and can run, how many tasks
 * it holds, when it last called, and which worker holds each lease since when.
 *
 * Workers do not connect: they call (Lease, Heartbeat, Settle). A worker is present while
 * it has a Lease call parked or has called within `goneAfterMs`; after that it is gone
 * (ListWorkers drops it, and so does ListGroups' `worker_available`) and its entry is
 * deleted, so a stream of short-lived worker ids cannot grow the map without bound.
 *
 * Lease holders are kept here rather than in the queue core's lease table: they are
 * operator information, never a dispatch decision, and they need not survive a restart
 * (a restarted node's leases are reclaimed anyway). An entry ends when its tasks are
 * settled, when a heartbeat finds the lease no longer held, or once its expiry passes
 * without a heartbeat (the grain reclaims the lease then too).
 */
import type { Clock } from "../../base/clock.js";

/** What a Lease call says about its worker. */
export interface WorkerCall {
  workerId: string;
  host: string;
  queues: readonly string[];
  batchTypes: ReadonlySet<string>;
  /** The worker's total concurrency (0: it did not say). */
  concurrency: number;
}

export interface WorkerView {
  workerId: string;
  host: string;
  queues: string[];
  /** Registered task types and batch types, sorted. */
  types: string[];
  concurrency: number;
  /** Tasks it holds leases on now. */
  inFlight: number;
  lastSeenMs: number;
  /** First call in this run of calls (a worker gone and back starts again). */
  connectedSinceMs: number;
  /** A Lease call of it is parked (it is idle and waiting for work). */
  polling: boolean;
}

export interface LeaseHolder {
  workerId: string;
  sinceMs: number;
}

interface HeldLease extends LeaseHolder {
  taskIds: Set<string>;
  expiresAtMs: number;
}

interface Entry {
  call: WorkerCall;
  registeredTypes: ReadonlySet<string>;
  lastSeenMs: number;
  connectedSinceMs: number;
  parked: number;
  leases: Set<string>;
}

/** Leased deliveries as the registry needs them. */
export interface HeldDelivery {
  leaseId: string;
  taskIds: readonly string[];
  leaseExpiresAtMs: number;
}

const PRUNE_EVERY_MS = 1_000;
const NO_TYPES: ReadonlySet<string> = new Set();

export class WorkerRegistry {
  private readonly workers = new Map<string, Entry>();
  private readonly leases = new Map<string, HeldLease>();
  /** Lease calls prune at most this often (a node may take thousands of calls a second). */
  private nextPruneAtMs = 0;

  constructor(private readonly clock: Clock, private readonly goneAfterMs: () => number) {}

  /** A Lease call arrived: records (or refreshes) the worker's description. */
  sawLease(call: WorkerCall): void {
    if (this.clock.nowMs() >= this.nextPruneAtMs) this.prune();
    const entry = this.touch(call.workerId);
    entry.call = call;
  }

  /** The worker declared the task types it handles (RegisterTaskTypes). */
  registered(workerId: string, types: readonly string[]): void {
    this.touch(workerId).registeredTypes = new Set(types);
  }

  /** Any call of the worker (a heartbeat, a settle): it is still there. */
  seen(workerId: string): void {
    if (workerId !== "") this.touch(workerId);
  }

  /** A Lease call of the worker parked (+1) or ended (-1). */
  parked(workerId: string, delta: 1 | -1): void {
    const entry = delta > 0 ? this.touch(workerId) : this.workers.get(workerId);
    if (!entry) return;
    entry.parked = Math.max(0, entry.parked + delta);
    entry.lastSeenMs = this.clock.nowMs();
  }

  /** The worker was handed these deliveries. */
  leased(workerId: string, deliveries: readonly HeldDelivery[]): void {
    if (deliveries.length === 0) return;
    const entry = this.touch(workerId);
    const nowMs = this.clock.nowMs();
    for (const d of deliveries) {
      this.leases.set(d.leaseId, { workerId, sinceMs: nowMs, taskIds: new Set(d.taskIds), expiresAtMs: d.leaseExpiresAtMs });
      entry.leases.add(d.leaseId);
    }
  }

  /** A heartbeat's answer for a lease: extended, or no longer held. */
  heartbeat(leaseId: string, held: boolean, expiresAtMs: number): void {
    const lease = this.leases.get(leaseId);
    if (!lease) return;
    if (held) lease.expiresAtMs = expiresAtMs;
    else this.dropLease(leaseId);
  }

  /** A task of a lease was settled (whatever the outcome): the lease ends with its last task. */
  settled(leaseId: string, taskId: string): void {
    const lease = this.leases.get(leaseId);
    if (!lease) return;
    lease.taskIds.delete(taskId);
    if (lease.taskIds.size === 0) this.dropLease(leaseId);
  }

  /** The worker is stopping (graceful drain): it leaves the list at once. */
  forget(workerId: string): void {
    const entry = this.workers.get(workerId);
    if (!entry) return;
    for (const id of entry.leases) this.leases.delete(id);
    this.workers.delete(workerId);
  }

  /** Who holds a lease and since when; undefined once it ended or its worker is gone. */
  holderOf(leaseId: string): LeaseHolder | undefined {
    const nowMs = this.clock.nowMs();
    const lease = this.leases.get(leaseId);
    const entry = lease && this.workers.get(lease.workerId);
    if (!lease || !entry || lease.expiresAtMs <= nowMs || !this.present(entry, nowMs)) return undefined;
    return { workerId: lease.workerId, sinceMs: lease.sinceMs };
  }

  /** Whether a present worker leases from `queue` with a batch handler for `type`. */
  canTakeBatches(queue: string, type: string): boolean {
    const nowMs = this.clock.nowMs();
    for (const entry of this.workers.values()) {
      if (entry.call.batchTypes.has(type) && entry.call.queues.includes(queue) && this.present(entry, nowMs)) return true;
    }
    return false;
  }

  /** Present workers, by id. */
  list(): WorkerView[] {
    this.prune();
    return [...this.workers.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([workerId, e]) => ({
      workerId, host: e.call.host, queues: [...e.call.queues],
      types: [...new Set([...e.registeredTypes, ...e.call.batchTypes])].sort(),
      concurrency: e.call.concurrency,
      inFlight: [...e.leases].reduce((n, id) => n + (this.leases.get(id)?.taskIds.size ?? 0), 0),
      lastSeenMs: e.lastSeenMs, connectedSinceMs: e.connectedSinceMs, polling: e.parked > 0,
    }));
  }

  get size(): number {
    return this.workers.size;
  }

  private touch(workerId: string): Entry {
    const nowMs = this.clock.nowMs();
    let entry = this.workers.get(workerId);
    if (!entry) {
      entry = {
        call: { workerId, host: "", queues: [], batchTypes: NO_TYPES, concurrency: 0 },
        registeredTypes: NO_TYPES, lastSeenMs: nowMs, connectedSinceMs: nowMs, parked: 0, leases: new Set(),
      };
      this.workers.set(workerId, entry);
    }
    entry.lastSeenMs = nowMs;
    return entry;
  }

  /**
   * Drops gone workers and lapsed leases. Linear in the workers and their leases; each
   * worker's leases are bounded by its concurrency and lapse within a lease TTL of their
   * last heartbeat, so the cost follows what is really running.
   */
  private prune(): void {
    const nowMs = this.clock.nowMs();
    this.nextPruneAtMs = nowMs + PRUNE_EVERY_MS;
    for (const [workerId, entry] of this.workers) {
      if (!this.present(entry, nowMs)) {
        this.forget(workerId);
        continue;
      }
      for (const id of entry.leases) {
        const lease = this.leases.get(id);
        if (!lease || lease.expiresAtMs <= nowMs) this.dropLease(id);
      }
    }
  }

  private present(entry: Entry, nowMs: number): boolean {
    return entry.parked > 0 || nowMs - entry.lastSeenMs <= this.goneAfterMs();
  }

  private dropLease(leaseId: string): void {
    const lease = this.leases.get(leaseId);
    if (!lease) return;
    this.leases.delete(leaseId);
    this.workers.get(lease.workerId)?.leases.delete(leaseId);
  }
}
