/**
 * The coordination port in memory, for tests and simulations: `MemoryEtcd` is one store
 * (revisions, leases that expire on an injected clock, prefix watches with history), and
 * each node gets its own `MemoryCoordination` client on it, with its own clock (a paused
 * process's clock fires nothing until it resumes) and its own `FaultSchedule`.
 *
 * Faults a schedule can inject, per call, decided from a seeded Random:
 * - a keep-alive whose request is lost (the lease is not renewed) or whose response is
 *   lost (renewed, but the caller sees a failure);
 * - a transaction that fails before it applies, or after (the caller cannot tell);
 * - a delay before watch events reach this client (order is kept, as etcd keeps it);
 * - latency on every answer.
 *
 * It keeps etcd's semantics where the cluster logic depends on them: one revision per
 * write transaction, create/mod revisions, a lease's keys deleted (and watched as
 * deletes) when it expires or is revoked, TTLs rounded up to whole seconds, watches from
 * a past revision replaying history in order. The claim rule is coordination.ts's, the
 * same function the etcd implementation uses.
 */
import type { Clock } from "../base/clock.js";
import type { Random } from "../base/random.js";
import {
  applyOverride, checkTypeRulesWrite, claimAllowed, ClusterKeys, heldBy, parseMemberRecord, parseOverride, parsePartitionRecord,
  type Claimant, type ClaimResult, type ClusterMeta, type Coordination, type EndpointHealth, type KeepAliveResult,
  type MemberChange, type MemberEntry, type MemberRecord, type MembersRead, type OverrideChange, type OverridesRead,
  type PartitionChange, type PartitionRecord, type PartitionsRead, type PutMemberResult,
  type TypeRulesChange, type TypeRulesRead, type TypeRulesWrite, type TypeRulesWriteResult, type Watch,
  WatchCompactedError,
} from "./coordination.js";

interface Kv {
  value: string;
  create: number;
  mod: number;
  lease?: string;
}

interface StoreEvent {
  key: string;
  kind: "put" | "delete";
  kv: Kv;
  revision: number;
}

interface StoreLease {
  ttlMs: number;
  expiresAtMs: number;
  keys: Set<string>;
  cancelTimer: () => void;
}

/** Events kept for watches that start in the past; older ones are "compacted". */
const HISTORY_MAX_EVENTS = 100_000;

/** The shared in-memory store (one "etcd cluster"). Its clock is the real passage of time. */
export class MemoryEtcd {
  revision = 1;
  private readonly kvs = new Map<string, Kv>();
  private readonly leases = new Map<string, StoreLease>();
  private readonly history: StoreEvent[] = [];
  private readonly watchers = new Set<{ prefix: string; notify: (e: StoreEvent) => void }>();
  private nextLease = 1;
  private compactedRevision = 0;
  /** When false, every call fails as if etcd were unreachable. */
  reachable = true;

  constructor(readonly clock: Clock) {}

  get(key: string): Kv | undefined {
    return this.kvs.get(key);
  }

  range(prefix: string): Array<[string, Kv]> {
    return [...this.kvs.entries()].filter(([k]) => k.startsWith(prefix)).sort(([a], [b]) => (a < b ? -1 : 1));
  }

  /** Applies one write transaction's puts and deletes at one new revision. */
  write(ops: Array<{ key: string; value?: string; lease?: string }>): number {
    const revision = ++this.revision;
    for (const op of ops) {
      const old = this.kvs.get(op.key);
      if (op.value === undefined) {
        if (!old) continue;
        this.kvs.delete(op.key);
        if (old.lease) this.leases.get(old.lease)?.keys.delete(op.key);
        this.emit({ key: op.key, kind: "delete", kv: { ...old, mod: revision }, revision });
      } else {
        if (old?.lease && old.lease !== op.lease) this.leases.get(old.lease)?.keys.delete(op.key);
        const kv: Kv = { value: op.value, create: old ? old.create : revision, mod: revision, ...(op.lease ? { lease: op.lease } : {}) };
        this.kvs.set(op.key, kv);
        if (op.lease) this.leases.get(op.lease)!.keys.add(op.key);
        this.emit({ key: op.key, kind: "put", kv, revision });
      }
    }
    return revision;
  }

  grant(ttlMs: number): string {
    const id = String(this.nextLease++);
    const ttl = Math.max(1, Math.ceil(ttlMs / 1000)) * 1000;
    const lease: StoreLease = { ttlMs: ttl, expiresAtMs: 0, keys: new Set(), cancelTimer: () => {} };
    this.leases.set(id, lease);
    this.renew(id, lease);
    return id;
  }

  leaseAlive(id: string): boolean {
    const lease = this.leases.get(id);
    return lease !== undefined && lease.expiresAtMs > this.clock.nowMs();
  }

  /** Whole seconds left on a lease, as etcd answers (-1 when gone). */
  timeLeftMs(id: string): number {
    const lease = this.leases.get(id);
    if (!lease || lease.expiresAtMs <= this.clock.nowMs()) return -1;
    return Math.ceil((lease.expiresAtMs - this.clock.nowMs()) / 1000) * 1000;
  }

  /** Renews a live lease; false when it is gone. */
  keepAlive(id: string): boolean {
    const lease = this.leases.get(id);
    if (!lease || lease.expiresAtMs <= this.clock.nowMs()) return false;
    this.renew(id, lease);
    return true;
  }

  revoke(id: string): void {
    const lease = this.leases.get(id);
    if (!lease) return;
    lease.cancelTimer();
    this.leases.delete(id);
    if (lease.keys.size > 0) this.write([...lease.keys].map((key) => ({ key })));
  }

  /** Drops the history up to `revision` (etcd's compaction): watches cannot start there any more. */
  compact(revision: number): void {
    this.compactedRevision = Math.max(this.compactedRevision, revision);
    while (this.history.length > 0 && this.history[0]!.revision <= revision) this.history.shift();
  }

  watch(prefix: string, fromRevision: number, notify: (e: StoreEvent) => void): () => void {
    if (fromRevision <= this.compactedRevision) throw new WatchCompactedError("mvcc: required revision has been compacted");
    for (const e of this.history) if (e.revision >= fromRevision && e.key.startsWith(prefix)) notify(e);
    const watcher = { prefix, notify };
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  private renew(id: string, lease: StoreLease): void {
    lease.cancelTimer();
    lease.expiresAtMs = this.clock.nowMs() + lease.ttlMs;
    lease.cancelTimer = this.clock.setTimer(lease.ttlMs, () => {
      if (this.leases.get(id) === lease && lease.expiresAtMs <= this.clock.nowMs()) this.revoke(id);
    });
  }

  private emit(e: StoreEvent): void {
    this.history.push(e);
    if (this.history.length > HISTORY_MAX_EVENTS) this.compact(this.history[0]!.revision);
    for (const w of this.watchers) if (e.key.startsWith(w.prefix)) w.notify(e);
  }
}

/** What goes wrong for one client, decided per call. */
export interface FaultSchedule {
  keepAlive(): "ok" | "lose-request" | "lose-response";
  transaction(): "ok" | "fail-before" | "fail-after";
  watchDelayMs(): number;
  latencyMs(): number;
}

export const NO_FAULTS: FaultSchedule = {
  keepAlive: () => "ok", transaction: () => "ok", watchDelayMs: () => 0, latencyMs: () => 0,
};

export interface FaultRates {
  /** Probability that a keep-alive's request is lost, and (separately) its response. */
  keepAliveLoss: number;
  /** Probability that a transaction fails before applying, and (separately) after. */
  transactionFailure: number;
  /** Watch events are delayed by up to this much. */
  watchDelayMsMax: number;
  latencyMsMax: number;
}

/** A schedule drawn from `random` (seeded in tests: a failure replays from its seed). */
export function seededFaults(random: Random, rates: FaultRates): FaultSchedule {
  return {
    keepAlive: () => {
      const r = random.next();
      if (r < rates.keepAliveLoss) return "lose-request";
      return r < 2 * rates.keepAliveLoss ? "lose-response" : "ok";
    },
    transaction: () => {
      const r = random.next();
      if (r < rates.transactionFailure) return "fail-before";
      return r < 2 * rates.transactionFailure ? "fail-after" : "ok";
    },
    watchDelayMs: () => Math.floor(random.next() * rates.watchDelayMsMax),
    latencyMs: () => Math.floor(random.next() * rates.latencyMsMax),
  };
}

export class CoordinationFault extends Error {}

/** One node's client of a MemoryEtcd. */
export class MemoryCoordination implements Coordination {
  private readonly keys: ClusterKeys;
  private readonly watches = new Set<() => void>();
  /** Faults can be swapped during a test (e.g. a quiet phase at the end). */
  faults: FaultSchedule;

  constructor(private readonly store: MemoryEtcd, cluster: string, private readonly clock: Clock, faults: FaultSchedule = NO_FAULTS) {
    this.keys = new ClusterKeys(cluster);
    this.faults = faults;
  }

  clusterMeta(desired: ClusterMeta): Promise<ClusterMeta> {
    return this.call(true, () => {
      const kv = this.store.get(this.keys.meta);
      if (kv) return JSON.parse(kv.value) as ClusterMeta;
      this.store.write([{ key: this.keys.meta, value: JSON.stringify(desired) }]);
      return desired;
    });
  }

  grantLease(ttlMs: number): Promise<string> {
    return this.call(false, () => this.store.grant(ttlMs));
  }

  keepAlive(leaseId: string, _timeoutMs: number): Promise<KeepAliveResult> {
    const fault = this.faults.keepAlive();
    if (fault === "lose-request") return this.fail("keep-alive request lost");
    const alive = this.store.reachable && this.store.keepAlive(leaseId);
    if (fault === "lose-response") return this.fail("keep-alive response lost");
    return this.call(false, () => (alive ? "alive" : "lost"));
  }

  leaseTimeLeftMs(leaseId: string): Promise<number> {
    return this.call(false, () => this.store.timeLeftMs(leaseId));
  }

  revokeLease(leaseId: string): Promise<void> {
    return this.call(false, () => this.store.revoke(leaseId));
  }

  putMember(record: MemberRecord, leaseId: string, mode: { create: true } | { updateOf: number }): Promise<PutMemberResult> {
    return this.call(true, () => {
      const key = this.keys.member(record.nodeId);
      const kv = this.store.get(key);
      const expected = "create" in mode ? 0 : mode.updateOf;
      if ((kv?.create ?? 0) !== expected || !this.store.leaseAlive(leaseId)) {
        return { ok: false, revision: this.store.revision, createRevision: kv?.create ?? 0, ...(kv ? { existing: entry(kv) } : {}) };
      }
      const revision = this.store.write([{ key, value: JSON.stringify(record), lease: leaseId }]);
      return { ok: true, revision, createRevision: "create" in mode ? revision : mode.updateOf };
    });
  }

  deleteMember(nodeId: string, createRevision: number): Promise<boolean> {
    return this.call(true, () => {
      const key = this.keys.member(nodeId);
      if ((this.store.get(key)?.create ?? 0) !== createRevision) return false;
      this.store.write([{ key }]);
      return true;
    });
  }

  members(): Promise<MembersRead> {
    return this.call(false, () => ({ members: this.store.range(this.keys.membersPrefix).map(([, kv]) => entry(kv)), revision: this.store.revision }));
  }

  watchMembers(fromRevision: number, onChange: (change: MemberChange) => void, onError: (error: Error) => void): Promise<Watch> {
    const prefix = this.keys.membersPrefix;
    return this.watchPrefix(prefix, fromRevision, (e) => onChange(e.kind === "put"
      ? { kind: "put", entry: entry(e.kv), revision: e.revision }
      : { kind: "delete", nodeId: e.key.slice(prefix.length), revision: e.revision }), onError);
  }

  watchPartitions(fromRevision: number, onChange: (change: PartitionChange) => void, onError: (error: Error) => void): Promise<Watch> {
    const prefix = this.keys.partitionsPrefix;
    return this.watchPrefix(prefix, fromRevision, (e) => {
      const p = Number(e.key.slice(prefix.length));
      onChange(e.kind === "put"
        ? { kind: "put", p, record: parsePartitionRecord(e.kv.value), epoch: e.revision, revision: e.revision }
        : { kind: "delete", p, revision: e.revision });
    }, onError);
  }

  private async watchPrefix(prefix: string, fromRevision: number, onEvent: (e: StoreEvent) => void, onError: (error: Error) => void): Promise<Watch> {
    let deliverAtMs = 0;
    let cancelled = false;
    const notify = (e: StoreEvent) => {
      // Delayed, never reordered: each event is due no earlier than the one before it.
      deliverAtMs = Math.max(deliverAtMs, this.clock.nowMs() + this.faults.watchDelayMs());
      this.clock.setTimer(deliverAtMs - this.clock.nowMs(), () => cancelled || onEvent(e));
    };
    let stop: () => void;
    try {
      stop = await this.call(false, () => this.store.watch(prefix, fromRevision, notify));
    } catch (err) {
      // As etcd3 does: the watch is created, then cancelled by the server with an error event.
      if (!(err instanceof WatchCompactedError)) throw err;
      this.clock.setTimer(0, () => onError(err));
      return { cancel: async () => {} };
    }
    const cancel = () => {
      cancelled = true;
      stop();
    };
    this.watches.add(cancel);
    return { cancel: async () => cancel() };
  }

  claimPartition(p: number, claimant: Claimant): Promise<ClaimResult> {
    return this.call(true, () => {
      const key = this.keys.partition(p);
      const kv = this.store.get(key);
      const current = kv ? parsePartitionRecord(kv.value) : undefined;
      if (current && heldBy(current, claimant)) return { ok: true, epoch: kv!.mod };
      const ownerRevision = current && current.state === "owned" ? this.store.get(this.keys.member(current.owner))?.create ?? 0 : 0;
      const selfRevision = this.store.get(this.keys.member(claimant.nodeId))?.create ?? 0;
      if (!claimAllowed(current, ownerRevision) || selfRevision !== claimant.memberRevision) {
        return { ok: false, holder: current ?? { owner: "", incarnation: "", memberRevision: 0, state: "released" }, epoch: kv?.mod ?? 0 };
      }
      const record: PartitionRecord = { owner: claimant.nodeId, incarnation: claimant.incarnation, memberRevision: claimant.memberRevision, state: "owned" };
      return { ok: true, epoch: this.store.write([{ key, value: JSON.stringify(record) }]) };
    });
  }

  releasePartition(p: number, claimant: Claimant, epoch: number, to?: string): Promise<boolean> {
    return this.call(true, () => {
      const key = this.keys.partition(p);
      if ((this.store.get(key)?.mod ?? 0) !== epoch) return false;
      const record: PartitionRecord = { owner: claimant.nodeId, incarnation: claimant.incarnation, memberRevision: claimant.memberRevision, state: "released", ...(to ? { to } : {}) };
      this.store.write([{ key, value: JSON.stringify(record) }]);
      return true;
    });
  }

  partitions(): Promise<PartitionsRead> {
    const prefix = this.keys.partitionsPrefix;
    return this.call(false, () => ({
      records: new Map(this.store.range(prefix).map(([k, kv]) => [Number(k.slice(prefix.length)), { record: parsePartitionRecord(kv.value), epoch: kv.mod }])),
      revision: this.store.revision,
    }));
  }

  setDrain(nodeId: string, drained: boolean): Promise<void> {
    return this.call(true, () => {
      this.store.write([{ key: this.keys.drain(nodeId), ...(drained ? { value: JSON.stringify({ nodeId, atMs: this.clock.nowMs() }) } : {}) }]);
    });
  }

  setPin(p: number, nodeId: string | undefined): Promise<void> {
    return this.call(true, () => {
      this.store.write([{ key: this.keys.pin(p), ...(nodeId !== undefined ? { value: JSON.stringify({ nodeId, atMs: this.clock.nowMs() }) } : {}) }]);
    });
  }

  overrides(): Promise<OverridesRead> {
    const prefix = this.keys.overridesPrefix;
    return this.call(false, () => {
      const read: OverridesRead = { drains: new Set(), pins: new Map(), revision: this.store.revision };
      for (const [key, kv] of this.store.range(prefix)) {
        const change = parseOverride(key.slice(prefix.length), kv.value, kv.mod);
        if (change) applyOverride(read, change);
      }
      return read;
    });
  }

  watchOverrides(fromRevision: number, onChange: (change: OverrideChange) => void, onError: (error: Error) => void): Promise<Watch> {
    const prefix = this.keys.overridesPrefix;
    return this.watchPrefix(prefix, fromRevision, (e) => {
      const change = parseOverride(e.key.slice(prefix.length), e.kind === "put" ? e.kv.value : undefined, e.revision);
      if (change) onChange(change);
    }, onError);
  }

  typeRules(): Promise<TypeRulesRead> {
    const prefix = this.keys.rulesPrefix;
    return this.call(false, () => ({
      entries: this.store.range(prefix).map(([k, kv]) => ({ type: k.slice(prefix.length), value: kv.value })),
      version: this.store.get(this.keys.rulesVersion)?.mod ?? 0,
      revision: this.store.revision,
    }));
  }

  async writeTypeRules(write: TypeRulesWrite, expectVersion: number): Promise<TypeRulesWriteResult> {
    checkTypeRulesWrite(write);
    return this.call(true, (): TypeRulesWriteResult => {
      if ((this.store.get(this.keys.rulesVersion)?.mod ?? 0) !== expectVersion) return { ok: false };
      const version = this.store.write([
        { key: this.keys.rulesVersion, value: "" },
        ...write.puts.map((e) => ({ key: this.keys.typeRules(e.type), value: e.value })),
        ...write.deletes.map((type) => ({ key: this.keys.typeRules(type) })),
      ]);
      return { ok: true, version };
    });
  }

  watchTypeRules(fromRevision: number, onChange: (change: TypeRulesChange) => void, onError: (error: Error) => void): Promise<Watch> {
    const prefix = this.keys.rulesPrefix;
    return this.watchPrefix(prefix, fromRevision, (e) => {
      const type = e.key.slice(prefix.length);
      onChange(e.kind === "put" ? { kind: "put", entry: { type, value: e.kv.value }, revision: e.revision } : { kind: "delete", type, revision: e.revision });
    }, onError);
  }

  async health(): Promise<EndpointHealth[]> {
    return [{ endpoint: "memory", healthy: this.store.reachable }];
  }

  async close(): Promise<void> {
    for (const cancel of this.watches) cancel();
    this.watches.clear();
  }

  /**
   * Runs `apply` against the store now (unless etcd is unreachable or a transaction
   * fault says otherwise) and answers after this client's latency, on its own clock.
   */
  private call<T>(transaction: boolean, apply: () => T): Promise<T> {
    if (!this.store.reachable) return this.fail("etcd unreachable");
    const fault = transaction ? this.faults.transaction() : "ok";
    if (fault === "fail-before") return this.fail("transaction failed before applying");
    let result: T;
    try {
      result = apply();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    if (fault === "fail-after") return this.fail("transaction outcome unknown");
    return new Promise((resolve) => this.clock.setTimer(this.faults.latencyMs(), () => resolve(result)));
  }

  private fail<T>(why: string): Promise<T> {
    return new Promise((_, reject) => this.clock.setTimer(this.faults.latencyMs(), () => reject(new CoordinationFault(why))));
  }
}

function entry(kv: Kv): MemberEntry {
  return { record: parseMemberRecord(kv.value), createRevision: kv.create, modRevision: kv.mod, leaseId: kv.lease ?? "0" };
}
