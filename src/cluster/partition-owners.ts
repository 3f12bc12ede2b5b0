/**
 * A cluster member's partitions: the records under `partitions/` (read, then watched),
 * claims in one etcd transaction each, and the answer to "may I serve p now?".
 *
 * - Claims are lazy and single-flight: the first call for a partition nobody holds, on
 *   the node the ring names, claims it (placement.ts, rule 6); concurrent calls for it
 *   wait on that one claim. At start a node claims back the partitions it holds rows of
 *   (`claimAtStart`), so their timers run again without waiting for a call.
 * - A claim records this registration (its member key's create revision). After a fence
 *   the node registers again as a new incarnation, so every claim it had is stale until it
 *   claims again (rule 2): nothing is acknowledged on an old registration's claim.
 * - The operator's overrides (drains and pins, overrides-view.ts) are read and watched
 *   alongside, and feed the desired owner (placement.ts).
 * - `holds(p)` also requires the membership to be serving now (its keep-alive fresh), so
 *   a paused process that wakes up acknowledges nothing before it has proven itself.
 * - With a changelog (cluster part 2, `log`), a claimed partition is served only once this
 *   node has fenced its log (the gate's `open`): until then it routes as "claim", and the
 *   claim finishes the fence. A partition this node releases is closed on the log.
 */
import { fenced, noActiveMember, ownerDown, relocating } from "../base/errors.js";
import type { Clock } from "../base/clock.js";
import type { ClusterLogger, PartitionStatus } from "./cluster-member.js";
import type { Coordination, MemberEntry, PartitionChange, Watch } from "./coordination.js";
import { WatchCompactedError } from "./coordination.js";
import type { Ownership } from "./ownership.js";
import { partitionOf } from "./partitions.js";
import { OverridesView } from "./overrides-view.js";
import { Placement, type PartitionEntry, type Route, type SelfRegistration } from "./placement.js";

/** What this needs from the node's membership (ClusterMember). */
export interface MembershipView {
  readonly nodeId: string;
  /** The current registration (memberRevision 0 while not registered). */
  registration(): SelfRegistration & { incarnation: string };
  members(): ReadonlyMap<string, MemberEntry>;
  serving(): boolean;
  readonly ringVersion: number;
}

/** The partitions' changelog as ownership sees it (server/changelog-link.ts builds it on the TurnJournal). */
export interface PartitionLogGate {
  /**
   * Has this node fenced p's log for its claim at `epoch` (and may append to it)? An open
   * of an earlier claim does not count: a node fenced out without noticing (no append
   * since) would otherwise serve a new claim before its catch-up and fence.
   */
  isOpen(p: number, epoch: number): boolean;
  /** Fences p's log for this node's claim at `epoch`; rejects (retryable) if the log cannot be reached. */
  open(p: number, epoch: number): Promise<void>;
  /** This node no longer holds p. */
  close(p: number, why: string): void;
}

export interface PartitionOwnersOptions {
  coordination: Coordination;
  membership: MembershipView;
  partitions: number;
  clock: Clock;
  logger: ClusterLogger;
  /** How long to wait before watching again after a watch ended. */
  rewatchMs: number;
  /** The changelog, when the cluster has one. */
  log?: PartitionLogGate;
}

export class PartitionOwners implements Ownership {
  readonly partitions: number;
  private readonly placement: Placement;
  private readonly records = new Map<number, PartitionEntry>();
  private readonly claiming = new Map<number, Promise<number | undefined>>();
  private revision = 0;
  private watch: Watch | undefined;
  private stopped = false;
  private readonly listeners = new Set<() => void>();
  private readonly claimedListeners = new Set<(p: number, takenOverFrom: string | undefined) => void>();
  /**
   * Takeovers claimed in etcd whose log fence has not succeeded yet (the log did not
   * answer): the claim that finishes it, which sees the record as this node's own, still
   * reports whom it took the partition from.
   */
  private readonly takingOver = new Map<number, string>();
  /** Partitions this node is handing off, and who waits for each move to end. */
  private readonly moving = new Map<number, Array<() => void>>();
  /** The operator's drains and pins, as watched. */
  readonly overrides: OverridesView;

  constructor(private readonly options: PartitionOwnersOptions) {
    this.partitions = options.partitions;
    // With a changelog a dead holder's partitions are taken over from the log (placement.ts, rule 5).
    this.placement = new Placement(options.partitions, options.log !== undefined);
    this.overrides = new OverridesView({
      coordination: options.coordination, clock: options.clock, logger: options.logger, rewatchMs: options.rewatchMs, onChange: () => this.changed(),
    });
  }

  get nodeId(): string {
    return this.options.membership.nodeId;
  }

  get ringVersion(): number {
    return this.options.membership.ringVersion;
  }

  partitionOf(queue: string): number {
    return partitionOf(queue, this.partitions);
  }

  /** Reads the records and watches them; resolves once the first read is in. */
  async start(): Promise<void> {
    await this.overrides.start();
    await this.resync();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.overrides.stop();
    await this.watch?.cancel().catch(() => {});
  }

  /** Called when the records change (a claim, a release, a watched change). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  route(p: number): Route {
    if (this.moving.has(p)) return { kind: "moving", p };
    const { membership, log } = this.options;
    const route = this.placement.route(p, membership.registration(), membership.members(), this.records, this.overrides);
    // Recorded as ours, but not yet fenced on the log at this claim's epoch: the claim path
    // finishes that first. (Fenced at an earlier claim is not enough: this node may have
    // lost p since, to a takeover, and its watch shows the new claim before the fence.)
    if (route.kind === "local" && log && !log.isOpen(p, route.epoch)) return { kind: "claim", p };
    return route;
  }

  /**
   * Called after each claim this node wins (lazy, at start, or of a partition handed to
   * it): its queues come back. `takenOverFrom` names the holder whose registration was
   * gone when its partition was claimed here (a takeover from the changelog), once per
   * claim, whichever path claimed it.
   */
  onClaimed(listener: (p: number, takenOverFrom: string | undefined) => void): () => void {
    this.claimedListeners.add(listener);
    return () => this.claimedListeners.delete(listener);
  }

  /** Who should hold `p`: its pin, or the ring over the eligible members (undefined when none is active). */
  desiredOwner(p: number): string | undefined {
    return this.placement.desiredOwner(p, this.options.membership.members(), this.overrides);
  }

  /** The members that keep a warm copy of p: the first `count` after its desired owner on the ring (placement.ts). */
  standbys(p: number, count: number): string[] {
    return this.placement.standbys(p, count, this.options.membership.members(), this.overrides);
  }

  /** The desired owner of every partition, indexed by partition (GetClusterStatus). */
  desiredOwners(): string[] {
    return this.placement.desiredOwners(this.options.membership.members(), this.overrides);
  }

  /** The members partitions may be placed on (active, not drained). */
  eligibleMembers(): string[] {
    return this.placement.eligible(this.options.membership.members(), this.overrides);
  }

  /** Is `nodeId` drained by an operator? */
  drained(nodeId: string): boolean {
    return this.overrides.drains.has(nodeId);
  }

  /** Partitions whose record names `nodeId` as holder, or as the receiver of a handoff not yet claimed: what a drain of it still has to move. */
  heldBy(nodeId: string): number[] {
    const out: number[] = [];
    for (const [p, { record }] of this.records) {
      if ((record.state === "owned" && record.owner === nodeId) || (record.state === "released" && record.to === nodeId)) out.push(p);
    }
    return out.sort((a, b) => a - b);
  }

  /** The partition's record as this node sees it (undefined: nobody has claimed it). */
  record(p: number): PartitionEntry | undefined {
    return this.records.get(p);
  }

  /** Partitions this node holds now (recorded as its current registration's). */
  held(): number[] {
    const out: number[] = [];
    for (let p = 0; p < this.partitions; p++) if (this.route(p).kind === "local") out.push(p);
    return out;
  }

  /** Starts handing `p` off: from now on calls for it wait (`whenMoved`) instead of being served. */
  beginMove(p: number): void {
    if (!this.moving.has(p)) this.moving.set(p, []);
  }

  /** The move of `p` ended (handed off, or given up): waiting calls route again. */
  endMove(p: number): void {
    const waiters = this.moving.get(p) ?? [];
    this.moving.delete(p);
    for (const wake of waiters) wake();
  }

  /** Resolves when `p` is not moving, or after `timeoutMs`: true if the move ended. */
  whenMoved(p: number, timeoutMs: number): Promise<boolean> {
    const waiters = this.moving.get(p);
    if (!waiters) return Promise.resolve(true);
    return new Promise((resolve) => {
      const cancel = this.options.clock.setTimer(timeoutMs, () => resolve(false));
      waiters.push(() => {
        cancel();
        resolve(true);
      });
    });
  }

  /** Marks `p` released to `to` in etcd (this node's claim at `epoch` ends); false if the claim was no longer current. */
  async release(p: number, epoch: number, to: string): Promise<boolean> {
    const self = this.options.membership.registration();
    const ok = await this.options.coordination.releasePartition(p, { nodeId: self.nodeId, incarnation: self.incarnation, memberRevision: self.memberRevision }, epoch, to);
    if (ok) {
      this.records.set(p, { record: { owner: self.nodeId, incarnation: self.incarnation, memberRevision: self.memberRevision, state: "released", to }, epoch });
      this.options.log?.close(p, `handed off to ${to}`);
      this.changed();
    }
    return ok;
  }

  holds(p: number): boolean {
    return this.route(p).kind === "local" && this.options.membership.serving();
  }

  members(): string[] {
    return [...this.options.membership.members().values()]
      .filter((m) => m.record.state === "active" || m.record.state === "draining").map((m) => m.record.nodeId).sort();
  }

  /** The active members (the ring's). */
  activeMembers(): string[] {
    return [...this.options.membership.members().values()].filter((m) => m.record.state === "active").map((m) => m.record.nodeId);
  }

  /** The other members that serve calls, with their advertised gRPC addresses. */
  others(): Array<{ nodeId: string; address: string }> {
    return [...this.options.membership.members().values()]
      .filter((m) => m.record.nodeId !== this.nodeId && (m.record.state === "active" || m.record.state === "draining"))
      .map((m) => ({ nodeId: m.record.nodeId, address: m.record.grpc }));
  }

  /** Every partition as recorded, with its pin, for GetClusterStatus. */
  states(): PartitionStatus[] {
    const members = this.options.membership.members();
    return Array.from({ length: this.partitions }, (_, partition) => {
      const pinnedTo = this.overrides.pins.get(partition) ?? "";
      const entry = this.records.get(partition);
      if (!entry) return { partition, owner: "", epoch: 0, state: "unclaimed" as const, ownerDown: false, pinnedTo };
      const owner = members.get(entry.record.owner);
      return {
        partition, owner: entry.record.owner, epoch: entry.epoch, state: entry.record.state,
        ownerDown: entry.record.state === "owned" && owner === undefined, pinnedTo,
      };
    });
  }

  /** The partition records as this node sees them (GetClusterStatus). */
  entries(): ReadonlyMap<number, PartitionEntry> {
    return this.records;
  }

  async acquire(p: number): Promise<number | undefined> {
    const route = this.route(p);
    switch (route.kind) {
      case "local":
        if (!this.options.membership.serving()) throw fenced(this.nodeId);
        return route.epoch;
      case "claim":
        return this.claim(p);
      case "down":
        throw ownerDown(`partition ${p}`, p, route.nodeId);
      case "none":
        throw noActiveMember(`partition ${p}`);
      case "remote":
        return undefined;
      case "moving":
        throw relocating(p);
    }
  }

  /** Claims back, at start, the partitions this node has rows of (those nobody else holds). */
  async claimAtStart(partitions: Iterable<number>): Promise<number[]> {
    const held: number[] = [];
    for (const p of partitions) {
      const route = this.route(p);
      const entry = this.records.get(p);
      // Only what is ours or nobody's: a partition another live node holds moved away
      // (its rows here are stale), and one held by a dead node is not ours to take.
      const ours = route.kind === "local" || (route.kind === "claim") || (entry === undefined && route.kind === "remote");
      if (!ours) {
        this.options.logger.warn({ partition: p, route: route.kind, holder: entry?.record.owner }, "this node has rows of a partition another node holds; not serving them");
        continue;
      }
      try {
        if ((await this.claim(p)) !== undefined) held.push(p);
      } catch (err) {
        this.options.logger.warn({ err, partition: p }, "could not claim a partition this node has rows of");
      }
    }
    return held;
  }

  async refresh(): Promise<void> {
    const read = await this.options.coordination.partitions();
    // Answered after the watch applied later changes (a claim of this node, say): the view
    // is newer than this read, which would take it back for good (later events at or below
    // the revision are ignored).
    if (read.revision < this.revision) return;
    this.records.clear();
    for (const [p, entry] of read.records) this.records.set(p, entry);
    this.revision = Math.max(this.revision, read.revision);
    this.changed();
  }

  private claim(p: number): Promise<number | undefined> {
    const inFlight = this.claiming.get(p);
    if (inFlight) return inFlight;
    const attempt = this.claimOnce(p).finally(() => this.claiming.delete(p));
    this.claiming.set(p, attempt);
    return attempt;
  }

  private async claimOnce(p: number): Promise<number | undefined> {
    const self = this.options.membership.registration();
    if (self.memberRevision === 0 || !this.options.membership.serving()) throw fenced(this.nodeId);
    // Held by another node (or handed to one) before this claim: a claim over it is a takeover, its registration being gone.
    const before = this.records.get(p)?.record;
    const takenOverFrom = (before?.state === "owned" ? (before.owner !== self.nodeId ? before.owner : undefined)
      : before?.to !== undefined && before.to !== self.nodeId ? before.to : undefined) ?? this.takingOver.get(p);
    const result = await this.options.coordination.claimPartition(p, { nodeId: self.nodeId, incarnation: self.incarnation, memberRevision: self.memberRevision });
    // Fence the log before serving: from here on a previous owner can append nothing more.
    if (result.ok && this.options.log) {
      if (takenOverFrom !== undefined) this.takingOver.set(p, takenOverFrom);
      await this.options.log.open(p, result.epoch);
    }
    if (result.ok) {
      this.takingOver.delete(p);
      // Never over a newer record the watch brought while the log was fenced (a handoff or
      // a claim after this one): the view of the records only goes forward.
      if ((this.records.get(p)?.epoch ?? 0) <= result.epoch) {
        this.records.set(p, { record: { owner: self.nodeId, incarnation: self.incarnation, memberRevision: self.memberRevision, state: "owned" }, epoch: result.epoch });
      }
      this.options.logger.info({ partition: p, epoch: result.epoch }, "claimed partition");
      this.changed();
      for (const listener of this.claimedListeners) listener(p, takenOverFrom);
      return result.epoch;
    }
    // Someone holds it: remember who, and let the caller route there.
    if (result.holder.owner !== "") this.records.set(p, { record: result.holder, epoch: result.epoch });
    this.changed();
    const route = this.route(p);
    if (route.kind === "down") throw ownerDown(`partition ${p}`, p, route.nodeId);
    return undefined;
  }

  /** Reads every record, then watches from the read on; a watch that ends is restarted. */
  private async resync(): Promise<void> {
    const { coordination, logger, clock } = this.options;
    await this.watch?.cancel().catch(() => {});
    await this.refresh();
    let ended = false;
    this.watch = await coordination.watchPartitions(this.revision + 1, (change) => this.apply(change), (err) => {
      if (ended || this.stopped) return;
      ended = true;
      logger.warn({ err, compacted: err instanceof WatchCompactedError }, "partition watch ended; reading the partitions again");
      const again = () => {
        if (this.stopped) return;
        this.resync().catch((e: unknown) => {
          logger.error({ err: e }, "could not watch the partitions again; retrying");
          clock.setTimer(this.options.rewatchMs, again);
        });
      };
      clock.setTimer(err instanceof WatchCompactedError ? 0 : this.options.rewatchMs, again);
    });
  }

  private apply(change: PartitionChange): void {
    if (change.revision <= this.revision) return;
    this.revision = change.revision;
    if (change.kind === "put") this.records.set(change.p, { record: change.record, epoch: change.epoch });
    else this.records.delete(change.p);
    // Claimed or handed on by another node meanwhile: no takeover of ours is pending there.
    if (change.kind === "delete" || change.record.owner !== this.nodeId) this.takingOver.delete(change.p);
    this.changed();
    // Handed to this node: claim it now, so its timers run without waiting for a call.
    if (change.kind === "put" && change.record.state === "released" && change.record.to === this.nodeId) {
      this.claim(change.p).catch((err: unknown) => this.options.logger.warn({ err, partition: change.p }, "could not claim a partition handed to this node; the next call for it retries"));
    }
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
