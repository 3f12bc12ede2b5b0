/**
 * The shell around MembershipCore: performs its actions on a Coordination (etcd or the
 * in-memory fake), feeds the answers back with the send times the core needs, arms one
 * timer at the core's next wake-up, and keeps the member view fed from a watch.
 *
 * Start: check the cluster's stored partition count (refuse to join with another one),
 * read the members and watch them, register, and wait (bounded) until this node is
 * active. Stop: mark draining, revoke the lease (the member key disappears at once;
 * closing the client alone would keep the lease alive), close the client.
 *
 * Registration takes over a dead registration of this same node: the data directory is
 * locked by this process (storage/dir-lock.ts), so a member key that carries the same
 * data-directory identity belongs to a process that is gone (kill -9, or this process's
 * own fenced incarnation); deleting it lets a restarted node rejoin without waiting out
 * the old lease. A key of another data directory under the same node id is a
 * misconfiguration: the node waits for it to go away (a TTL) and then refuses to start.
 */
import type { Clock } from "../base/clock.js";
import { WatchCompactedError, type Coordination, type EndpointHealth, type MemberChange, type MemberEntry, type MemberRecord, type MemberState, type Watch } from "./coordination.js";
import { MembershipCore, rewatchMs, type MembershipAction, type MembershipInput, type Phase } from "./membership.js";
import { PartitionMap } from "./partitions.js";

/** A registration (grant and member write) slower than this share of the TTL renews its lease before it counts. */
const SLOW_REGISTRATION_FRACTION = 0.25;

/** The logging this needs (pino's shape). */
export interface ClusterLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface ClusterMemberOptions {
  coordination: Coordination;
  clock: Clock;
  cluster: string;
  partitions: number;
  ttlMs: number;
  /** Everything in this node's member record but its state and incarnation. */
  self: Omit<MemberRecord, "state" | "incarnation">;
  newIncarnation: () => string;
  logger: ClusterLogger;
  /** Bound on start-up (registration until active). */
  startTimeoutMs?: number;
}

/** Refusals at start-up that an operator must fix; printed as one line. */
export class ClusterJoinError extends Error {}

/** A member as GetClusterStatus reports it. */
export interface MemberStatus {
  entry: MemberEntry;
  self: boolean;
  /** Lease time left as etcd reports it (-1: gone; undefined: not asked). */
  leaseLeftMs?: number;
}

export interface ClusterStatus {
  cluster: string;
  nodeId: string;
  phase: Phase;
  incarnation: string;
  serving: boolean;
  fences: number;
  ringVersion: number;
  partitions: number;
  members: MemberStatus[];
  /** Owner of every partition on the ring of active members (empty when none is active). */
  owners: readonly string[];
  /** Every partition as recorded (who holds it, at which epoch); absent before the records are read. */
  partitionStates?: PartitionStatus[];
  /** Nodes an operator drained (members or not); absent for a single node. */
  drained?: string[];
}

export interface PartitionStatus {
  partition: number;
  owner: string;
  epoch: number;
  state: "owned" | "released" | "unclaimed";
  ownerDown: boolean;
  /** The node an operator pinned the partition to ("" when none). */
  pinnedTo: string;
}

/** What GetClusterStatus reads: a cluster member, or a single node (a ring of one). */
export interface MembershipStatusSource {
  readonly clustered: boolean;
  status(withLeases: boolean): Promise<ClusterStatus>;
  etcdHealth(): Promise<EndpointHealth[]>;
}

/** A single node's membership: itself, active, at ring version 1, owning every partition. */
export class SoloMembership implements MembershipStatusSource {
  readonly clustered = false;
  constructor(private readonly self: Omit<MemberRecord, "state" | "incarnation">, private readonly partitions: number) {}

  async status(): Promise<ClusterStatus> {
    const entry: MemberEntry = { record: { ...this.self, incarnation: "", state: "active" }, createRevision: 0, modRevision: 0, leaseId: "0" };
    return {
      cluster: "", nodeId: this.self.nodeId, phase: "active", incarnation: "", serving: true, fences: 0, ringVersion: 1,
      partitions: this.partitions, members: [{ entry, self: true }], owners: new PartitionMap([this.self.nodeId], this.partitions).ownerList(),
      partitionStates: Array.from({ length: this.partitions }, (_, partition) => ({ partition, owner: this.self.nodeId, epoch: 1, state: "owned" as const, ownerDown: false, pinnedTo: "" })),
    };
  }

  async etcdHealth(): Promise<EndpointHealth[]> {
    return [];
  }
}

export class ClusterMember implements MembershipStatusSource {
  readonly clustered = true;
  readonly core: MembershipCore;
  private watch: Watch | undefined;
  private cancelWake = () => {};
  private lastRegisterError = "";
  private stopped = false;
  private activeWaiters: Array<() => void> = [];
  private startedAtMs = 0;
  private readonly changeListeners = new Set<() => void>();
  private readonly fenceListeners = new Set<() => void>();

  constructor(private readonly options: ClusterMemberOptions) {
    this.core = new MembershipCore({ nodeId: options.self.nodeId, ttlMs: options.ttlMs, newIncarnation: options.newIncarnation });
  }

  get nodeId(): string {
    return this.options.self.nodeId;
  }

  /** Joins the cluster; resolves once this node is active, rejects with a ClusterJoinError it cannot. */
  async start(): Promise<void> {
    const { coordination, clock, partitions, cluster } = this.options;
    const timeoutMs = this.options.startTimeoutMs ?? this.options.ttlMs * 2 + 5_000;
    this.startedAtMs = clock.nowMs();
    const deadline = this.startedAtMs + timeoutMs;
    // etcd may blip while a node starts: retry the reads until the start deadline.
    for (;;) {
      try {
        const meta = await coordination.clusterMeta({ partitions, createdAtMs: clock.nowMs() });
        if (meta.partitions !== partitions) {
          throw new ClusterJoinError(`cluster ${JSON.stringify(cluster)} was created with cluster_partitions=${meta.partitions} ` +
            `(stored in etcd); this node has cluster_partitions=${partitions}: refusing to join. The partition count is fixed ` +
            `when a cluster is created; set cluster_partitions to ${meta.partitions}, or use another cluster_name.`);
        }
        await this.resync();
        break;
      } catch (err) {
        if (err instanceof ClusterJoinError || clock.nowMs() >= deadline) throw err;
        this.options.logger.warn({ err }, "cannot read the cluster from etcd yet; retrying");
        await new Promise<void>((r) => clock.setTimer(Math.floor(this.options.ttlMs / 3), r));
      }
    }
    this.input({ kind: "start" });
    await new Promise<void>((resolve, reject) => {
      const cancel = clock.setTimer(Math.max(0, deadline - clock.nowMs()), () => {
        reject(new ClusterJoinError(`could not join cluster ${JSON.stringify(cluster)} within ${timeoutMs}ms` +
          (this.lastRegisterError ? `: ${this.lastRegisterError}` : "")));
      });
      this.whenActive(() => {
        cancel();
        resolve();
      });
    });
  }

  /** Marks this member draining (the ring stops giving it partitions); resolves once the state is written, or after 1 s. */
  async beginDrain(): Promise<void> {
    if (this.stopped) return;
    this.input({ kind: "drain" });
    await this.bounded(this.waitFor(() => this.core.phase !== "draining" || this.stateSettled()), 1_000);
  }

  /** Leaves the cluster: draining, then the lease revoked (the key disappears at once). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.input({ kind: "drain" });
    // The draining state is informative; never let it hold a stop up for long.
    await this.bounded(this.waitFor(() => this.core.phase !== "draining" || this.stateSettled()), 1_000);
    this.stopped = true;
    for (const action of this.core.handle({ kind: "stop" }, this.options.clock.nowMs())) {
      if (action.kind === "revoke") {
        await this.bounded(this.options.coordination.revokeLease(action.leaseId).catch((err: unknown) =>
          this.options.logger.warn({ err }, "could not revoke the member lease; it ends after its TTL")), 2_000);
      }
    }
    this.cancelWake();
    await this.watch?.cancel().catch(() => {});
    await this.options.coordination.close();
  }

  /** This node's registration now (memberRevision 0 while it holds none). */
  registration(): { nodeId: string; memberRevision: number; incarnation: string } {
    return { nodeId: this.nodeId, memberRevision: this.core.registeredRevision(), incarnation: this.core.incarnation };
  }

  /** Every member key as this node sees it. */
  members(): ReadonlyMap<string, MemberEntry> {
    return this.core.view.members;
  }

  get ringVersion(): number {
    return this.core.view.ringVersion;
  }

  /** Called after every membership input (a watched change, a registration, a fence). */
  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Called when this node fences itself (before it registers again): what it was serving must stop now. */
  onFenced(listener: () => void): () => void {
    this.fenceListeners.add(listener);
    return () => this.fenceListeners.delete(listener);
  }

  /** May this node serve writes now (its registration provably alive)? */
  serving(): boolean {
    return this.core.serving(this.options.clock.nowMs());
  }

  /** The membership as this node sees it; `withLeases` asks etcd for every member's lease time left. */
  async status(withLeases = false): Promise<ClusterStatus> {
    const view = this.core.view;
    const entries = [...view.members.values()].sort((a, b) => (a.record.nodeId < b.record.nodeId ? -1 : 1));
    const members: MemberStatus[] = await Promise.all(entries.map(async (entry) => {
      const self = entry.record.nodeId === this.nodeId;
      if (!withLeases) return { entry, self };
      const leaseLeftMs = await this.options.coordination.leaseTimeLeftMs(entry.leaseId).catch(() => undefined);
      return { entry, self, ...(leaseLeftMs === undefined ? {} : { leaseLeftMs }) };
    }));
    const active = view.activeMembers();
    return {
      cluster: this.options.cluster, nodeId: this.nodeId, phase: this.core.phase, incarnation: this.core.incarnation,
      serving: this.serving(), fences: this.core.fences, ringVersion: view.ringVersion, partitions: this.options.partitions, members,
      owners: active.length > 0 ? new PartitionMap(active, this.options.partitions).ownerList() : [],
    };
  }

  etcdHealth(): Promise<EndpointHealth[]> {
    return this.options.coordination.health();
  }

  private input(input: MembershipInput): void {
    if (this.stopped) return;
    const actions = this.core.handle(input, this.options.clock.nowMs());
    for (const action of actions) this.perform(action);
    this.armWake();
    for (const listener of this.changeListeners) this.notify(listener, "membership change");
    if (this.core.phase === "active") {
      const waiters = this.activeWaiters;
      this.activeWaiters = [];
      for (const w of waiters) w();
    }
  }

  /**
   * Inputs arrive in etcd's callbacks and timers, outside any caller's promise chain: a
   * listener that throws is logged, never an exception that ends the process.
   */
  private notify(listener: () => void, what: string): void {
    try {
      listener();
    } catch (err) {
      this.options.logger.error({ err }, `a ${what} listener failed`);
    }
  }

  private perform(action: MembershipAction): void {
    const { coordination, clock, logger } = this.options;
    switch (action.kind) {
      case "register":
        this.register(action.incarnation, action.state).catch((err: unknown) => {
          this.lastRegisterError = err instanceof Error ? err.message : String(err);
          logger.warn({ err, incarnation: action.incarnation }, "cluster registration failed; retrying");
          this.input({ kind: "registerFailed", incarnation: action.incarnation, error: this.lastRegisterError });
        });
        return;
      case "keepAlive": {
        const sentAtMs = clock.nowMs();
        coordination.keepAlive(action.leaseId, this.keepAliveTimeoutMs()).then(
          (result) => this.input({ kind: "keepAlive", leaseId: action.leaseId, sentAtMs, result }),
          (err: unknown) => {
            logger.warn({ err }, "cluster keep-alive failed");
            this.input({ kind: "keepAlive", leaseId: action.leaseId, sentAtMs, result: "failed" });
          });
        return;
      }
      case "writeState":
        coordination.putMember(this.record(this.core.incarnation, action.state), action.leaseId, { updateOf: action.createRevision }).then(
          (res) => this.input({ kind: "stateWritten", leaseId: action.leaseId, state: action.state, ok: res.ok }),
          () => this.input({ kind: "stateWritten", leaseId: action.leaseId, state: action.state, ok: false }));
        return;
      case "abandonLease":
        coordination.revokeLease(action.leaseId).catch(() => {});
        return;
      case "revoke":
        coordination.revokeLease(action.leaseId).catch(() => {});
        return;
      case "fenced":
        logger.warn({ reason: action.reason, incarnation: action.incarnation, silentMs: action.silentMs },
          "fenced itself: not serving writes until registered again as a new incarnation");
        for (const listener of this.fenceListeners) this.notify(listener, "fence");
        return;
      case "registeredAs":
        logger.info({ incarnation: action.incarnation, memberRevision: action.createRevision, fences: this.core.fences }, "cluster member registered");
        return;
      case "active":
        logger.info({
          incarnation: action.incarnation, ringVersion: this.core.view.ringVersion,
          ...(this.core.fences === 0 ? { joinMs: clock.nowMs() - this.startedAtMs } : { fences: this.core.fences }),
        }, "cluster member active");
        return;
    }
  }

  /** Grant a lease and create the member key (taking over a dead registration of this data dir). */
  private async register(incarnation: string, state: MemberState): Promise<void> {
    const { coordination, clock, ttlMs } = this.options;
    const sentAtMs = clock.nowMs();
    const leaseId = await coordination.grantLease(ttlMs);
    try {
      const record = this.record(incarnation, state);
      let res = await coordination.putMember(record, leaseId, { create: true });
      if (!res.ok && res.existing && res.existing.record.dataDirId === this.options.self.dataDirId) {
        await coordination.deleteMember(this.nodeId, res.existing.createRevision);
        res = await coordination.putMember(record, leaseId, { create: true });
      }
      if (!res.ok) {
        const holder = res.existing?.record;
        throw new ClusterJoinError(`node id ${JSON.stringify(this.nodeId)} is registered by another live process` +
          (holder ? ` (incarnation ${holder.incarnation}, grpc ${holder.grpc}, data dir ${holder.dataDirId})` : "") +
          "; give each node its own node_id");
      }
      this.input({ kind: "registered", incarnation, leaseId, createRevision: res.createRevision, sentAtMs: await this.aliveSince(leaseId, sentAtMs) });
    } catch (err) {
      coordination.revokeLease(leaseId).catch(() => {});
      throw err;
    }
  }

  /** A keep-alive's bound: well inside the fence deadline, so that a retry (to another endpoint) still fits. */
  private keepAliveTimeoutMs(): number {
    return Math.max(250, Math.floor(this.options.ttlMs / 4));
  }

  /**
   * Since when the new lease provably lives: a lease lives a TTL from its grant, which
   * this node cannot see, only from when it asked for it. A registration that took long
   * (etcd electing a leader after a partition healed: seconds) would leave the new
   * incarnation almost no provable life, and it would fence itself as soon as it became
   * active; one keep-alive sent now moves that point to now.
   */
  private async aliveSince(leaseId: string, askedAtMs: number): Promise<number> {
    const { coordination, clock, ttlMs } = this.options;
    if (clock.nowMs() - askedAtMs < ttlMs * SLOW_REGISTRATION_FRACTION) return askedAtMs;
    const renewAtMs = clock.nowMs();
    const result = await coordination.keepAlive(leaseId, this.keepAliveTimeoutMs()).catch(() => "failed" as const);
    if (result === "lost") throw new Error("the new member lease ended before the registration was answered (etcd was slow); registering again");
    return result === "alive" ? renewAtMs : askedAtMs;
  }

  /**
   * Reads the members and watches from the last change on (see membership.ts, "The
   * view"). If etcd has compacted that history, it watches from the read's revision
   * instead: the view is still exact, but a deletion in between (compacted away) cannot
   * count in the ring version, which may then stay lower than other nodes' until the next
   * membership change. A watch that ends is restarted after a third of the TTL or 250 ms,
   * whichever is shorter (`rewatchMs`: soon after etcd returns, never a hot loop).
   */
  private async resync(fromRead = false): Promise<void> {
    const { coordination, logger, clock } = this.options;
    await this.watch?.cancel().catch(() => {});
    const read = await coordination.members();
    this.input({ kind: "snapshot", read });
    const from = fromRead ? read.revision + 1 : this.core.view.ringVersion + 1;
    let ended = false;
    this.watch = await coordination.watchMembers(from,
      (change: MemberChange) => this.input({ kind: "change", change }),
      (err: Error) => {
        if (ended || this.stopped) return;
        ended = true;
        const compacted = err instanceof WatchCompactedError;
        logger.warn({ err, compacted }, "member watch ended; reading the members again");
        clock.setTimer(compacted ? 0 : rewatchMs(this.options.ttlMs), () => {
          if (this.stopped) return;
          this.resync(compacted).catch((e: unknown) => {
            logger.error({ err: e }, "could not watch the members again; retrying");
            this.resyncLater();
          });
        });
      });
  }

  private resyncLater(): void {
    this.options.clock.setTimer(rewatchMs(this.options.ttlMs), () => {
      if (!this.stopped) this.resync().catch(() => this.resyncLater());
    });
  }

  private record(incarnation: string, state: MemberState): MemberRecord {
    return { ...this.options.self, incarnation, state };
  }

  private armWake(): void {
    this.cancelWake();
    const at = this.core.nextWakeAtMs();
    if (!Number.isFinite(at) || this.stopped) return;
    this.cancelWake = this.options.clock.setTimer(Math.max(0, at - this.options.clock.nowMs()), () => this.input({ kind: "tick" }));
  }

  private whenActive(fn: () => void): void {
    if (this.core.phase === "active") fn();
    else this.activeWaiters.push(fn);
  }

  private stateSettled(): boolean {
    return this.core.phase === "draining" && !this.core.writingState;
  }

  private async waitFor(done: () => boolean): Promise<void> {
    while (!done() && !this.stopped) await new Promise<void>((r) => this.options.clock.setTimer(10, r));
  }

  private async bounded(p: Promise<unknown>, ms: number): Promise<void> {
    let cancel = () => {};
    await Promise.race([p, new Promise<void>((r) => (cancel = this.options.clock.setTimer(ms, r)))]);
    cancel();
  }
}
