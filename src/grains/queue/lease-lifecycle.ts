/**
 * A delivery from the moment a lease is opened until it ends: heartbeats extend it, a
 * settlement ends it for one task, and the clock ends it by whichever comes first of
 * the attempt's end (timeout or deadline: the handler failed) and the lapse (no
 * heartbeat: the worker probably died). `LeaseTable` keeps the timers; this part
 * decides what each ending does to the tasks.
 *
 * Why a part of its own: a lease is a fencing token. Every path that reads one
 * (settle, heartbeat, tick) must first end it if its attempt is over, so a late worker
 * is refused the same way whether or not the grain's timer has fired yet (`liveLease`).
 *
 * Invariant: an active task is in exactly one live lease and holds its slots; a task
 * leaves its lease only through `TaskExits.detachFromLease`.
 */
import { ConveyorError } from "../../base/errors.js";
import { quote } from "../../base/limits.js";
import type { AttemptEnding } from "./attempts.js";
import type { CoreMemory } from "./core-memory.js";
import { earliest, type Lease } from "./lease-table.js";
import type { RuleMembership } from "./rule-membership.js";
import type { TaskExits } from "./task-exits.js";
import type { Outcome, TaskIndexEntry } from "./task.js";
import type { WaitingTasks } from "./waiting-tasks.js";

/** A delivery the core decided to hand out. */
export interface DeliveryPlan {
  leaseId: string;
  taskIds: string[];
  leaseExpiresAtMs: number;
  /** The effective deadline of the attempt; 0 when none. */
  deadlineAtMs: number;
  /** A fired group's members (or one redelivered member), for a batch handler. */
  batch: boolean;
  group: string;
}

export interface Settlement {
  leaseId: string;
  taskId: string;
  outcome: Outcome;
  result?: Uint8Array;
  error?: string;
  /** A failure's stack trace, as the worker's SDK formats it. */
  stack?: string;
}

export interface LeaseStatusView {
  leaseId: string;
  held: boolean;
  cancelRequested: boolean;
  cancelReason: string;
  leaseExpiresAtMs: number;
}

export class LeaseLifecycle {
  constructor(
    private readonly memory: CoreMemory,
    private readonly rules: RuleMembership,
    private readonly waiting: WaitingTasks,
    private readonly exits: TaskExits,
  ) {}

  /**
   * Leases `batch` (one task, or a fired batch's members: one call to one handler) to a
   * worker. The caller has already passed the dispatch gates and advanced the ranks.
   */
  open(batch: readonly TaskIndexEntry[], nowMs: number, workerId: string): DeliveryPlan {
    const leaseId = this.memory.deps.newId();
    const expiresAtMs = nowMs + this.memory.config.leaseTtlMs;
    // The attempt ends at the earliest member's effective deadline: a batch is one call.
    let deadlineAtMs = 0;
    for (const e of batch) deadlineAtMs = earliest(deadlineAtMs, effectiveDeadline(e, nowMs));
    const lease = this.memory.leases.open(leaseId, expiresAtMs, deadlineAtMs);
    for (const e of batch) {
      this.rules.acquire(e);
      e.state = "active";
      e.expiresAtMs = 0; // the pre-dispatch TTL no longer applies once the task has run
      e.leaseId = leaseId;
      e.leaseExpiresAtMs = expiresAtMs;
      e.attemptEndsAtMs = deadlineAtMs;
      e.attemptStartedAtMs = nowMs;
      e.attemptWorker = workerId;
      e.attemptNumber += 1;
      lease.taskIds.add(e.id);
      this.memory.persist({ kind: "activate", entry: { ...e } });
    }
    const first = batch[0]!;
    return {
      leaseId, taskIds: [...lease.taskIds], leaseExpiresAtMs: expiresAtMs, deadlineAtMs,
      batch: first.batchId !== "", group: first.group,
    };
  }

  /**
   * An active task loaded from disk. It gets at least a full TTL from now: heartbeats
   * are not persisted (a write per beat), so it is given the benefit of the doubt once.
   */
  adoptLoaded(e: TaskIndexEntry, nowMs: number): void {
    e.leaseExpiresAtMs = Math.max(e.leaseExpiresAtMs, nowMs + this.memory.config.leaseTtlMs);
    // The attempt's end is durable. A row written before it was (0 with a timeout or a
    // deadline) gets its timeout from now: the benefit of the doubt, once.
    if (e.attemptEndsAtMs === 0) e.attemptEndsAtMs = effectiveDeadline(e, nowMs);
    this.memory.leases.adopt(e.leaseId, e.id, e.leaseExpiresAtMs, e.attemptEndsAtMs);
    this.rules.acquire(e);
  }

  /** Extends held leases by a full TTL; reports lost and cancelled ones. */
  heartbeat(leaseIds: readonly string[], nowMs: number): LeaseStatusView[] {
    return leaseIds.map((leaseId) => {
      const lease = this.liveLease(leaseId, nowMs);
      if (lease) {
        lease.expiresAtMs = nowMs + this.memory.config.leaseTtlMs;
        return { leaseId, held: true, cancelRequested: false, cancelReason: "", leaseExpiresAtMs: lease.expiresAtMs };
      }
      const revoked = this.memory.leases.revocation(leaseId);
      return { leaseId, held: false, cancelRequested: !!revoked, cancelReason: revoked?.reason ?? "", leaseExpiresAtMs: 0 };
    });
  }

  /** Applies one worker outcome; null when applied, else the error that refused it. */
  settle(s: Settlement, nowMs: number): ConveyorError | null {
    const lease = this.liveLease(s.leaseId, nowMs);
    const e = this.memory.entries.get(s.taskId);
    if (!lease || !lease.taskIds.has(s.taskId) || !e || e.state !== "active" || e.leaseId !== s.leaseId) {
      const why = this.memory.leases.revocation(s.leaseId) ? "the task was cancelled" : "its attempt timed out, it expired, was settled or never existed";
      return new ConveyorError("FAILED_PRECONDITION", "LEASE_NOT_HELD",
        `lease ${quote(s.leaseId)} does not hold task ${quote(s.taskId)}: ${why}`, "settlements.lease_id");
    }
    this.exits.detachFromLease(lease, e, settledAttempt(s), nowMs);
    // A batch member that fails or is released comes back on its own, as a batch of one.
    if (e.batchId !== "" && (s.outcome === "retry" || s.outcome === "released")) e.batchId = e.id;
    switch (s.outcome) {
      case "success":
        this.exits.finish(e, { kind: "complete", outcome: { finishedAtMs: nowMs, result: s.result ?? new Uint8Array() } });
        break;
      case "retry":
        this.exits.failAttempt(e, s.error || "handler failed", nowMs, "backoff");
        break;
      case "skip_retry":
        this.exits.archive(e, s.error || "skip retry", nowMs);
        break;
      case "released":
        this.waiting.makePending(e, e.seq);
        this.waiting.armExpiry(e);
        this.memory.persist({ kind: "release", entry: { ...e } });
        break;
      default: {
        const never: never = s.outcome;
        throw new Error(`unknown outcome ${String(never)}`);
      }
    }
    return null;
  }

  /** Ends every lease whose attempt is over or which lapsed by `nowMs`. */
  endDue(nowMs: number): void {
    const { leases } = this.memory;
    for (let lease = leases.popEndedAttempt(nowMs); lease; lease = leases.popEndedAttempt(nowMs)) this.endIfOver(lease, nowMs);
    for (let lease = leases.popExpiryDue(nowMs); lease; lease = leases.popExpiryDue(nowMs)) {
      // A heartbeat moved the expiry: re-arm at the new time (lazy deletion).
      if (!this.endIfOver(lease, nowMs)) leases.rearmExpiry(lease);
    }
    leases.forgetRevocations(nowMs);
  }

  /**
   * The lease `leaseId` if it is still held at `nowMs`. A lease whose attempt is over
   * ends here even if the grain's timer has not fired yet: a settle or a heartbeat that
   * arrives after the attempt's end is refused, like one after its lease was reclaimed.
   */
  private liveLease(leaseId: string, nowMs: number): Lease | undefined {
    const lease = this.memory.leases.get(leaseId);
    if (lease && lease.endsAtMs > 0 && lease.endsAtMs <= nowMs) {
      this.endIfOver(lease, nowMs);
      return undefined;
    }
    return lease;
  }

  /**
   * Ends a lease whose attempt is over or which lapsed, by whichever came first; false
   * when neither has. A lapse keeps the task's place (the worker probably died); a
   * timed-out attempt is the handler's failure and backs off like a RETRY.
   */
  private endIfOver(lease: Lease, nowMs: number): boolean {
    const timedOut = lease.endsAtMs > 0 && lease.endsAtMs <= nowMs;
    const lapsed = lease.expiresAtMs <= nowMs;
    if (timedOut && (!lapsed || lease.endsAtMs <= lease.expiresAtMs)) this.timeOut(lease, nowMs);
    else if (lapsed) this.lapse(lease, nowMs);
    else return false;
    return true;
  }

  /**
   * The attempt reached its end (timeout or deadline) while the worker still held it:
   * the lease is revoked, its slots are freed, and every task of it fails as timed out
   * (backoff, or archived when retries are exhausted or the deadline has passed). A
   * batch member comes back on its own, as a batch of one, like a retried member.
   */
  private timeOut(lease: Lease, nowMs: number): void {
    const members = [...lease.taskIds].map((id) => this.memory.entries.get(id)).filter((e): e is TaskIndexEntry => !!e);
    const error = timeoutError(lease.endsAtMs, members);
    this.memory.report({ kind: "attempt_timed_out", leaseId: lease.id, taskIds: [...lease.taskIds] });
    for (const e of members) {
      this.exits.detachFromLease(lease, e, { outcome: "timed_out", error }, nowMs);
      if (e.batchId !== "") e.batchId = e.id;
      this.exits.failAttempt(e, error, nowMs, "backoff");
    }
    this.memory.leases.close(lease.id);
  }

  /** No heartbeat in time: the tasks go back to pending at their old place. */
  private lapse(lease: Lease, nowMs: number): void {
    const ids = [...lease.taskIds];
    this.memory.report({ kind: "lease_expired", leaseId: lease.id, taskIds: ids });
    for (const id of ids) {
      const e = this.memory.entries.get(id);
      if (!e) continue;
      this.exits.detachFromLease(lease, e, { outcome: "lease_expired", error: LAPSE_ERROR }, nowMs);
      this.exits.failAttempt(e, LAPSE_ERROR, nowMs, "immediate");
    }
    this.memory.leases.close(lease.id);
  }
}

const LAPSE_ERROR = "lease expired: the worker stopped heartbeating";

/** How a settled attempt ended, for its history. */
export function settledAttempt(s: Pick<Settlement, "outcome" | "error" | "stack">): AttemptEnding {
  const stack = s.stack ? { stack: s.stack } : {};
  switch (s.outcome) {
    case "success": return { outcome: "succeeded", error: "" };
    case "retry": return { outcome: "failed", error: s.error || "handler failed", ...stack };
    case "skip_retry": return { outcome: "failed_no_retry", error: s.error || "skip retry", ...stack };
    case "released": return { outcome: "released", error: "" };
  }
}

/**
 * When an attempt of `e` leased at `nowMs` ends: the earlier of its deadline and now +
 * its timeout; 0 = never. Kept a safe integer (it is stored as an INTEGER and sent as an
 * int64): an instant past 2^53 ms is centuries away and means the same as "never soon".
 */
function effectiveDeadline(e: TaskIndexEntry, nowMs: number): number {
  const end = earliest(e.deadlineAtMs, e.timeoutMs > 0 ? nowMs + e.timeoutMs : 0);
  return Math.min(end, Number.MAX_SAFE_INTEGER);
}

/**
 * Why an attempt that ended at `endsAtMs` failed: a member's deadline (the task is then
 * archived, not retried), or the shortest per-attempt timeout among its members.
 */
function timeoutError(endsAtMs: number, members: readonly TaskIndexEntry[]): string {
  if (members.some((e) => e.deadlineAtMs > 0 && e.deadlineAtMs <= endsAtMs)) return "attempt timed out at the task's deadline";
  const timeouts = members.map((e) => e.timeoutMs).filter((t) => t > 0);
  return timeouts.length > 0 ? `timed out after ${Math.min(...timeouts)}ms` : "attempt timed out";
}
