/**
 * A node's membership in the cluster, as a pure state machine: inputs (what etcd
 * answered, what the clock says) in, actions (what to ask etcd next, what to log) out.
 * No IO, no clock of its own, no randomness of its own: `ClusterMember` (cluster-member.ts)
 * is the shell that performs the actions, and the property tests drive this same core on
 * the in-memory coordination with faults and simulated time.
 *
 * Lifecycle: idle → registering → joining → active → draining → stopped, with a detour
 * through `fenced` whenever this node can no longer prove that its registration is alive.
 *
 * Self-fencing. Other nodes may take this node's partitions once its member key is gone,
 * which etcd does when the lease is not renewed for a TTL. The lease cannot end earlier
 * than TTL after the last keep-alive that etcd *answered*, measured from when that
 * keep-alive was *sent* (etcd renewed it after it was sent). So the node measures from
 * the send time of its last successful keep-alive, and fences (stops serving writes)
 * once FENCE_FRACTION of the TTL has passed without another: well before the lease can
 * have ended, whatever the delays of the answers. Keep-alives go every TTL/3 or 500 ms,
 * whichever is shorter (KEEPALIVE_EVERY_MS_MAX says why); one that
 * fails, or is not answered within KEEPALIVE_RETRY_MS_MAX, is followed by another (the
 * earlier one stays in flight), so one lost keep-alive never fences; silence for 3/4 of
 * a TTL does. Why not wait for the unanswered one: while etcd elects a new leader, a
 * keep-alive sent before the election is held by a follower and answered only about a
 * second after the election ends, where one sent after it is answered at once (measured,
 * etcd 3.4, leader killed); so the silence a leader loss costs is the election plus at
 * most KEEPALIVE_RETRY_MS_MAX, not the election plus a keep-alive's timeout. A process
 * paused past its TTL (SIGSTOP,
 * a long GC) sees the elapsed time on its first tick and fences before doing anything
 * else. A fenced node then abandons the old lease (revoking it if etcd answers) and
 * registers again as a new incarnation: the cluster sees a new registration (a new
 * create revision of the member key), so claims recorded under the old one are void.
 * An explicit "lease lost" answer, or the watch showing this node's key deleted, fences
 * at once.
 *
 * The view: every member key under the prefix, from a snapshot and then the watch in
 * revision order. The ring version is the etcd revision of the last membership change
 * (the last put or delete under `members/`): every node applies the same changes in
 * the same order, so it is the same number everywhere. To see deletions that happened
 * before a node started, the shell watches from the snapshot's highest member mod
 * revision + 1, not from the snapshot's revision, so the last change is replayed.
 */
import type { MemberChange, MemberEntry, MemberRecord, MembersRead, MemberState } from "./coordination.js";

/** Fence once this fraction of the TTL has passed since the last successful keep-alive was sent. */
export const FENCE_FRACTION = 0.75;
/** Keep-alives per TTL, at least. */
export const KEEPALIVES_PER_TTL = 3;
/**
 * And at least this often. What a leader loss costs a node is the silence from its last
 * renewal before the kill to its first after the election: up to one interval plus the
 * election plus KEEPALIVE_RETRY_MS_MAX. etcd 3.4 with its default 1 s election timeout
 * took 1.0–2.8 s to elect here (a split vote takes a second round), so with the default
 * 5 s TTL (fence at 3.75 s) the interval must be short: at 500 ms an election of up to
 * ~3 s never fences. A keep-alive is one small stream per etcd endpoint.
 */
export const KEEPALIVE_EVERY_MS_MAX = 500;
/**
 * A keep-alive that failed, or has not been answered this long after it was sent, is
 * followed by another this soon (at most), not a third of a TTL later: while etcd is in
 * trouble (an endpoint dead, a leader being elected) fresh keep-alives are what get
 * through first. A healthy etcd answers in milliseconds, so in normal operation this
 * adds nothing.
 */
export const KEEPALIVE_RETRY_MS_MAX = 200;

/**
 * A registration that failed (etcd away) is tried again this soon at most (a third of the
 * TTL when that is shorter). Once etcd answers again, a fenced node serves after its next
 * attempt: a longer pause would be time every write waits (the etcd restart test, issue
 * 34). An attempt against an unreachable etcd fails at once, so a few per second is cheap.
 */
export const REGISTER_RETRY_MS_MAX = 250;
/** How soon a watch that ended (etcd away) is started again, at most; for the same reason. */
export const WATCH_RETRY_MS_MAX = 250;
/** The pause before watching again after a watch ended: a third of the TTL, at most WATCH_RETRY_MS_MAX. */
export const rewatchMs = (ttlMs: number): number => Math.min(WATCH_RETRY_MS_MAX, Math.floor(ttlMs / KEEPALIVES_PER_TTL));

export type Phase = "idle" | "registering" | "joining" | "active" | "draining" | "fenced" | "stopped";

/** Phases in which this node holds a registration it keeps alive. */
const REGISTERED: ReadonlySet<Phase> = new Set(["joining", "active", "draining"]);

export type MembershipInput =
  | { kind: "start" }
  | { kind: "registered"; incarnation: string; leaseId: string; createRevision: number; sentAtMs: number }
  | { kind: "registerFailed"; incarnation: string; error: string }
  | { kind: "keepAlive"; leaseId: string; sentAtMs: number; result: "alive" | "lost" | "failed" }
  | { kind: "stateWritten"; leaseId: string; state: MemberState; ok: boolean }
  | { kind: "snapshot"; read: MembersRead }
  | { kind: "change"; change: MemberChange }
  | { kind: "tick" }
  | { kind: "drain" }
  | { kind: "stop" };

export type MembershipAction =
  /** Grant a lease and create the member key as `incarnation` (taking over a dead registration of this same data dir). */
  | { kind: "register"; incarnation: string; state: MemberState }
  | { kind: "keepAlive"; leaseId: string }
  | { kind: "writeState"; leaseId: string; createRevision: number; state: MemberState }
  /** Stop keeping `leaseId` alive and revoke it if etcd answers (best effort, nobody waits). */
  | { kind: "abandonLease"; leaseId: string }
  /** The clean stop: revoke the lease (the key disappears at once). */
  | { kind: "revoke"; leaseId: string }
  | { kind: "fenced"; reason: string; incarnation: string; silentMs: number }
  | { kind: "registeredAs"; incarnation: string; createRevision: number; previous?: string }
  | { kind: "active"; incarnation: string };

export interface MembershipOptions {
  nodeId: string;
  ttlMs: number;
  /** A new incarnation id (random in production, seeded in tests). */
  newIncarnation: () => string;
  /** Wait before registering again after a failed attempt. */
  retryMs?: number;
}

/** Every member key as this node has seen it, and the ring version. */
export class MemberView {
  readonly members = new Map<string, MemberEntry>();
  ringVersion = 0;

  /** Replaces the view with a snapshot; returns the revision to watch from. */
  reset(read: MembersRead): number {
    this.members.clear();
    let last = 0;
    for (const m of read.members) {
      this.members.set(m.record.nodeId, m);
      last = Math.max(last, m.modRevision);
    }
    this.ringVersion = last;
    return last + 1;
  }

  /** Applies one watched change (older or repeated revisions are ignored); true if it changed the view. */
  apply(change: MemberChange): boolean {
    if (change.revision <= this.ringVersion) return false;
    if (change.kind === "put") this.members.set(change.entry.record.nodeId, change.entry);
    else this.members.delete(change.nodeId);
    this.ringVersion = change.revision;
    return true;
  }

  /** The members the ring is built from: the active ones, sorted. */
  activeMembers(): string[] {
    return [...this.members.values()].filter((m) => m.record.state === "active").map((m) => m.record.nodeId).sort();
  }
}

export class MembershipCore {
  phase: Phase = "idle";
  incarnation = "";
  leaseId = "";
  createRevision = 0;
  /** Send time of the last keep-alive (or grant) etcd answered for the current lease. */
  lastAliveSentAtMs = 0;
  readonly view = new MemberView();
  /** How many times this node fenced itself (for tests and metrics). */
  fences = 0;
  private desired: MemberState = "joining";
  private written: MemberState | undefined;
  private writing = false;
  private registerInFlight = false;
  private nextKeepAliveAtMs = 0;
  private retryAtMs = 0;
  private readonly fenceAfterMs: number;
  private readonly keepAliveEveryMs: number;
  private readonly retryMs: number;

  constructor(private readonly options: MembershipOptions) {
    if (!(options.ttlMs >= 1000)) throw new Error(`the member TTL must be at least 1s (etcd leases are whole seconds), got ${options.ttlMs}ms`);
    this.fenceAfterMs = Math.floor(options.ttlMs * FENCE_FRACTION);
    this.keepAliveEveryMs = Math.min(KEEPALIVE_EVERY_MS_MAX, Math.floor(options.ttlMs / KEEPALIVES_PER_TTL));
    this.retryMs = options.retryMs ?? Math.min(REGISTER_RETRY_MS_MAX, Math.floor(options.ttlMs / 3));
  }

  /** Is a state write in flight? */
  get writingState(): boolean {
    return this.writing;
  }

  /** May this node serve writes at `nowMs`? Only while its registration is provably alive. */
  serving(nowMs: number): boolean {
    return (this.phase === "active" || this.phase === "draining") && nowMs - this.lastAliveSentAtMs < this.fenceAfterMs;
  }

  /** The registration this node holds now: its member key's create revision, 0 while it holds none. */
  registeredRevision(): number {
    return REGISTERED.has(this.phase) ? this.createRevision : 0;
  }

  /** Time left on the lease at best (etcd's own TTL may be a little longer). */
  leaseLeftMs(nowMs: number): number {
    if (!REGISTERED.has(this.phase)) return 0;
    return Math.max(0, this.lastAliveSentAtMs + this.options.ttlMs - nowMs);
  }

  /** When the shell must call `tick` next (a keep-alive, a fence deadline or a retry). */
  nextWakeAtMs(): number {
    if (REGISTERED.has(this.phase)) return Math.min(this.nextKeepAliveAtMs, this.lastAliveSentAtMs + this.fenceAfterMs);
    if ((this.phase === "registering" || this.phase === "fenced") && !this.registerInFlight) return this.retryAtMs;
    return Number.POSITIVE_INFINITY;
  }

  handle(input: MembershipInput, nowMs: number): MembershipAction[] {
    // Fencing is decided first, whatever the input: a paused process must fence before it acts on old news.
    const out = this.checkFence(nowMs);
    switch (input.kind) {
      case "start":
        if (this.phase !== "idle") return out;
        return [...out, ...this.register(nowMs)];
      case "registered":
        return [...out, ...this.onRegistered(input, nowMs)];
      case "registerFailed":
        if (input.incarnation === this.incarnation && this.phase === "registering") {
          this.registerInFlight = false;
          this.retryAtMs = nowMs + this.retryMs;
        }
        return out;
      case "keepAlive":
        return [...out, ...this.onKeepAlive(input, nowMs)];
      case "stateWritten":
        if (input.leaseId !== this.leaseId) return out;
        this.writing = false;
        if (input.ok) this.written = input.state;
        if (input.ok && input.state === "active" && this.phase === "joining") {
          this.phase = "active";
          out.push({ kind: "active", incarnation: this.incarnation });
        }
        return [...out, ...this.syncState()];
      case "snapshot":
        this.view.reset(input.read);
        return [...out, ...this.afterViewChange(nowMs)];
      case "change": {
        const c = input.change;
        if (!this.view.apply(c)) return out;
        if (c.kind === "delete" && c.nodeId === this.options.nodeId && REGISTERED.has(this.phase) && c.revision > this.createRevision) {
          return [...out, ...this.fence("this node's member key was deleted (its lease ended)", nowMs)];
        }
        return [...out, ...this.afterViewChange(nowMs)];
      }
      case "tick":
        return [...out, ...this.onTick(nowMs)];
      case "drain":
        if (this.phase === "stopped") return out;
        this.desired = "draining";
        if (this.phase === "active" || this.phase === "joining") this.phase = "draining";
        return [...out, ...this.syncState()];
      case "stop": {
        const lease = this.leaseId;
        const wasRegistered = REGISTERED.has(this.phase);
        this.phase = "stopped";
        this.leaseId = "";
        return wasRegistered && lease ? [...out, { kind: "revoke", leaseId: lease }] : out;
      }
    }
  }

  private checkFence(nowMs: number): MembershipAction[] {
    if (!REGISTERED.has(this.phase)) return [];
    const silentMs = nowMs - this.lastAliveSentAtMs;
    if (silentMs < this.fenceAfterMs) return [];
    return this.fence(`no keep-alive answered for ${silentMs}ms of a ${this.options.ttlMs}ms TTL`, nowMs);
  }

  private fence(reason: string, nowMs: number): MembershipAction[] {
    const out: MembershipAction[] = [{ kind: "fenced", reason, incarnation: this.incarnation, silentMs: nowMs - this.lastAliveSentAtMs }];
    this.fences++;
    const stopping = this.phase === "draining" && this.desired === "draining";
    if (this.leaseId) out.push({ kind: "abandonLease", leaseId: this.leaseId });
    this.leaseId = "";
    this.createRevision = 0;
    this.written = undefined;
    this.writing = false;
    if (stopping) {
      // A draining node that loses its lease has nothing to come back for.
      this.phase = "stopped";
      return out;
    }
    // Register again at once: a new incarnation is what ends the fence.
    this.phase = "fenced";
    return [...out, ...this.register(nowMs)];
  }

  private register(nowMs: number): MembershipAction[] {
    this.phase = "registering";
    this.registerInFlight = true;
    this.incarnation = this.options.newIncarnation();
    this.desired = this.desired === "draining" ? "draining" : "joining";
    this.retryAtMs = nowMs + this.retryMs;
    return [{ kind: "register", incarnation: this.incarnation, state: "joining" }];
  }

  private onRegistered(input: Extract<MembershipInput, { kind: "registered" }>, nowMs: number): MembershipAction[] {
    if (input.incarnation !== this.incarnation || this.phase !== "registering") {
      // A registration this node no longer wants (it was stopped or fenced meanwhile).
      return [{ kind: "abandonLease", leaseId: input.leaseId }];
    }
    this.registerInFlight = false;
    this.phase = "joining";
    this.leaseId = input.leaseId;
    this.createRevision = input.createRevision;
    this.lastAliveSentAtMs = input.sentAtMs;
    this.nextKeepAliveAtMs = input.sentAtMs + this.keepAliveEveryMs;
    this.written = "joining";
    const out: MembershipAction[] = [{ kind: "registeredAs", incarnation: input.incarnation, createRevision: input.createRevision }];
    // The registration may be old news already (answered after a pause).
    out.push(...this.checkFence(nowMs));
    if (this.phase === "joining") out.push(...this.afterViewChange(nowMs));
    return out;
  }

  private onKeepAlive(input: Extract<MembershipInput, { kind: "keepAlive" }>, nowMs: number): MembershipAction[] {
    if (input.leaseId !== this.leaseId || !REGISTERED.has(this.phase)) return [];
    if (input.result === "alive") {
      if (input.sentAtMs > this.lastAliveSentAtMs) {
        this.lastAliveSentAtMs = input.sentAtMs;
        // Renewed as of its send time: the next is due a third of a TTL after that.
        this.nextKeepAliveAtMs = input.sentAtMs + this.keepAliveEveryMs;
      }
      return [];
    }
    if (input.result === "lost") return this.fence("etcd says the lease is gone", nowMs);
    // Failed (no answer, or a transport error): try again soon.
    this.nextKeepAliveAtMs = Math.min(this.nextKeepAliveAtMs, nowMs + this.retryAfterMs());
    return [];
  }

  private onTick(nowMs: number): MembershipAction[] {
    if ((this.phase === "registering" || this.phase === "fenced") && !this.registerInFlight && nowMs >= this.retryAtMs) return this.register(nowMs);
    if (!REGISTERED.has(this.phase)) return [];
    const out: MembershipAction[] = [];
    if (nowMs >= this.nextKeepAliveAtMs) {
      // If this one is not answered soon, another follows (an answer moves this on).
      this.nextKeepAliveAtMs = nowMs + this.retryAfterMs();
      out.push({ kind: "keepAlive", leaseId: this.leaseId });
    }
    return [...out, ...this.syncState()];
  }

  private retryAfterMs(): number {
    return Math.min(KEEPALIVE_RETRY_MS_MAX, Math.floor(this.keepAliveEveryMs / 4));
  }

  /** Once the view shows this registration, a joining node becomes active (nothing to warm yet). */
  private afterViewChange(_nowMs: number): MembershipAction[] {
    if (this.phase !== "joining") return [];
    const self = this.view.members.get(this.options.nodeId);
    if (self && self.createRevision === this.createRevision && this.desired === "joining") this.desired = "active";
    return this.syncState();
  }

  /** Writes the desired state when it differs from the written one (one write at a time). */
  private syncState(): MembershipAction[] {
    if (!REGISTERED.has(this.phase) || this.writing || this.written === this.desired) return [];
    this.writing = true;
    return [{ kind: "writeState", leaseId: this.leaseId, createRevision: this.createRevision, state: this.desired }];
  }
}

/** The record this node writes, for a state and incarnation. */
export function memberRecord(base: Omit<MemberRecord, "state" | "incarnation">, incarnation: string, state: MemberState): MemberRecord {
  return { ...base, incarnation, state };
}
