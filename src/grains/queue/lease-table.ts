/**
 * The lease table: deliveries held by workers, when each lapses without heartbeats, when
 * each attempt ends (timeout or deadline), and leases revoked by a cancel.
 *
 * Why a part of its own: a lease id is a fencing token, and everything that decides
 * whether a settle or heartbeat is honoured reads this table. Its timers are deleted
 * lazily (a heartbeat moves an expiry, a settle leaves an attempt end behind), so the
 * table also owns the rules for telling a current timer from a stale one.
 *
 * Invariants: a lease in the table holds at least one task (the last detach removes
 * it); an attempt end in the heap is current only while it equals its lease's
 * `endsAtMs`; stale attempt ends are compacted when they pile up against the leases
 * (`Heap.compactIfStale` holds the thresholds). A revocation is remembered for one lease TTL, so the
 * worker learns from its next heartbeat that its task was cancelled.
 */
import { Heap } from "./heap.js";

export interface Lease {
  id: string;
  taskIds: Set<string>;
  expiresAtMs: number;
  /** When the attempt ends (the delivery's effective deadline); 0 = no limit. */
  endsAtMs: number;
}

interface LeaseTimer {
  atMs: number;
  leaseId: string;
}

export class LeaseTable {
  private readonly leases = new Map<string, Lease>();
  private readonly expiry = new Heap<LeaseTimer>((a, b) => a.atMs < b.atMs);
  /** Attempt ends of leases, lazily deleted (a settled lease leaves its entry behind). */
  private readonly attemptEnds = new Heap<LeaseTimer>((a, b) => a.atMs < b.atMs);
  private readonly revoked = new Map<string, { reason: string; untilMs: number }>();

  get size(): number {
    return this.leases.size;
  }

  get(leaseId: string): Lease | undefined {
    return this.leases.get(leaseId);
  }

  has(leaseId: string): boolean {
    return this.leases.has(leaseId);
  }

  /** A new lease (tasks are added by the caller); arms its expiry and attempt end. */
  open(id: string, expiresAtMs: number, endsAtMs: number): Lease {
    const lease: Lease = { id, taskIds: new Set(), expiresAtMs, endsAtMs };
    this.leases.set(id, lease);
    this.expiry.push({ atMs: expiresAtMs, leaseId: id });
    if (endsAtMs > 0) {
      this.compactAttemptEnds();
      this.attemptEnds.push({ atMs: endsAtMs, leaseId: id });
    }
    return lease;
  }

  /**
   * A stored active task joins its lease (activation): the lease is opened with the
   * first member's expiry, and its attempt ends at the earliest member's end.
   */
  adopt(leaseId: string, taskId: string, expiresAtMs: number, attemptEndsAtMs: number): void {
    let lease = this.leases.get(leaseId);
    if (!lease) lease = this.open(leaseId, expiresAtMs, 0);
    lease.taskIds.add(taskId);
    const endsAtMs = earliest(lease.endsAtMs, attemptEndsAtMs);
    if (endsAtMs !== lease.endsAtMs) {
      lease.endsAtMs = endsAtMs;
      this.attemptEnds.push({ atMs: endsAtMs, leaseId });
    }
  }

  /** Takes a task off its lease; the lease goes when its last task does. */
  detach(lease: Lease, taskId: string): void {
    lease.taskIds.delete(taskId);
    if (lease.taskIds.size === 0) this.leases.delete(lease.id);
  }

  /** Removes a lease whose tasks have all been dealt with. */
  close(leaseId: string): void {
    this.leases.delete(leaseId);
  }

  revoke(leaseId: string, reason: string, untilMs: number): void {
    this.revoked.set(leaseId, { reason, untilMs });
  }

  revocation(leaseId: string): { reason: string } | undefined {
    return this.revoked.get(leaseId);
  }

  /** The next lease whose attempt end is due at `nowMs` (stale ends are skipped). */
  popEndedAttempt(nowMs: number): Lease | undefined {
    for (let top = this.attemptEnds.peek(); top && top.atMs <= nowMs; top = this.attemptEnds.peek()) {
      this.attemptEnds.pop();
      const lease = this.leases.get(top.leaseId);
      if (lease && lease.endsAtMs === top.atMs) return lease;
    }
    return undefined;
  }

  /** The next lease whose (possibly moved) expiry timer is due at `nowMs`. */
  popExpiryDue(nowMs: number): Lease | undefined {
    for (let top = this.expiry.peek(); top && top.atMs <= nowMs; top = this.expiry.peek()) {
      this.expiry.pop();
      const lease = this.leases.get(top.leaseId);
      if (lease) return lease;
    }
    return undefined;
  }

  /** A heartbeat moved the lease's expiry: arm it at the new time (lazy deletion). */
  rearmExpiry(lease: Lease): void {
    this.expiry.push({ atMs: lease.expiresAtMs, leaseId: lease.id });
  }

  forgetRevocations(nowMs: number): void {
    for (const [leaseId, r] of this.revoked) if (r.untilMs <= nowMs) this.revoked.delete(leaseId);
  }

  nextAtMs(): number | undefined {
    const a = this.expiry.peek()?.atMs;
    const b = this.attemptEnds.peek()?.atMs;
    if (a === undefined) return b;
    return b === undefined ? a : Math.min(a, b);
  }

  /** Drops attempt-end entries of leases that are gone when they outnumber the live ones. */
  private compactAttemptEnds(): void {
    this.attemptEnds.compactIfStale(this.leases.size, (a) => this.leases.get(a.leaseId)?.endsAtMs === a.atMs);
  }
}

/** The earlier of two instants where 0 means "none". */
export function earliest(a: number, b: number): number {
  if (a === 0) return b;
  if (b === 0) return a;
  return Math.min(a, b);
}
