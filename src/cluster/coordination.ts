/**
 * The coordination port: everything a conveyor cluster needs from etcd, and nothing
 * more. Two implementations: `EtcdCoordination` (etcd3 1.1.2 over gRPC, for real) and
 * `MemoryCoordination` (one in-memory store shared by several clients on an injected
 * clock, with a seeded fault schedule, for unit and property tests of the membership and
 * claim/fence logic). `test/cluster/coordination-contract.test.ts` runs one suite against
 * both, so the fake stays honest.
 *
 * Why a port: membership, failure detection and ownership come from etcd (a proven
 * engine: leases, revisions, transactions, watches), never from home-made consensus; but
 * the logic built on them (when to fence, which incarnation, what a claim means) must be
 * testable with faults and simulated time, which a real etcd cannot give.
 *
 * Only KV, leases, transactions and watch are used. Never etcd3's Election/Lock helpers
 * (microsoft/etcd3#158: two leaders after an etcd restart); and a clean stop revokes its
 * lease explicitly, because closing an etcd3 client keeps an auto-kept-alive lease alive
 * until the process exits.
 *
 * Key layout under `/conveyor/<cluster>/` (values are JSON):
 *   meta             { partitions, createdAtMs }            written once, at cluster creation
 *   members/<node>   MemberRecord, attached to the node's lease (gone when the lease ends)
 *   partitions/<p>   PartitionRecord; its mod revision after a claim is p's epoch
 *   placement/drains/<node>  { nodeId, atMs }: an operator drained the node (it owns nothing); no lease, so it outlives restarts
 *   placement/pins/<p>       { nodeId, atMs }: an operator moved p to the node; the placement honours it while that node is eligible
 *   rules/<type>     one task type's concurrency rules, opaque here (server/rules/rule-record.ts
 *                    encodes them: JSON with a version field)
 *   rules-version    rewritten by every rules write, in the same transaction: its mod
 *                    revision is the version of the whole rule set, which a write must
 *                    name (a write made against an older set is refused and re-validated)
 */

/** A member's lifecycle as the cluster sees it (a fenced node has no key at all). */
export type MemberState = "joining" | "active" | "draining";
export const MEMBER_STATES: readonly MemberState[] = ["joining", "active", "draining"];

/** The value of `members/<node>`. */
export interface MemberRecord {
  nodeId: string;
  /** New for every registration: a process start, or a re-registration after fencing. */
  incarnation: string;
  state: MemberState;
  /** The gRPC address peers and clients use (`cluster_advertise`). */
  grpc: string;
  /** The HTTP address (metrics, health, dashboard). */
  http: string;
  /** The conveyord version. */
  version: string;
  /** The data directory's identity (node.json): the same directory means the same node. */
  dataDirId: string;
  startedAtMs: number;
}

/** A member key as read from etcd. */
export interface MemberEntry {
  record: MemberRecord;
  /** The revision that created the key: identifies this registration (claims record it). */
  createRevision: number;
  modRevision: number;
  leaseId: string;
}

/** One change under `members/`, in revision order. */
export type MemberChange =
  | { kind: "put"; entry: MemberEntry; revision: number }
  | { kind: "delete"; nodeId: string; revision: number };

export interface MembersRead {
  members: MemberEntry[];
  /** The store's revision at the read. */
  revision: number;
}

/** What is stored once per cluster. */
export interface ClusterMeta {
  partitions: number;
  createdAtMs: number;
}

/** The value of `partitions/<p>`. */
export interface PartitionRecord {
  owner: string;
  incarnation: string;
  /** The create revision of the owner's member key when it claimed. */
  memberRevision: number;
  state: "owned" | "released";
  /** A released partition: the node its rows were handed to, which alone may claim it next. */
  to?: string;
}

/** Who claims, identified down to its registration. */
export interface Claimant {
  nodeId: string;
  incarnation: string;
  memberRevision: number;
}

export type ClaimResult =
  | { ok: true; epoch: number }
  | { ok: false; holder: PartitionRecord; epoch: number };

export interface PutMemberResult {
  ok: boolean;
  /** The revision of the write (when ok). */
  revision: number;
  /** The key's create revision after the write (when ok), or the existing entry (when not). */
  createRevision: number;
  existing?: MemberEntry;
}

/** One change under `partitions/`, in revision order (a put's mod revision is the partition's epoch). */
export type PartitionChange =
  | { kind: "put"; p: number; record: PartitionRecord; epoch: number; revision: number }
  | { kind: "delete"; p: number; revision: number };

export interface PartitionsRead {
  records: Map<number, { record: PartitionRecord; epoch: number }>;
  /** The store's revision at the read: watch from the next one. */
  revision: number;
}

/**
 * The operator's overrides of the ring (`conveyor cluster drain` / `move`), as read: the
 * drained nodes and the pinned partitions. Plain keys, not attached to any lease: an
 * override is a decision that stays until an operator undoes it, whatever restarts.
 */
export interface PlacementOverrides {
  drains: ReadonlySet<string>;
  pins: ReadonlyMap<number, string>;
}

export const NO_OVERRIDES: PlacementOverrides = { drains: new Set(), pins: new Map() };

export interface OverridesRead {
  drains: Set<string>;
  pins: Map<number, string>;
  /** The store's revision at the read: watch from the next one. */
  revision: number;
}

/** One task type's stored rules, as the opaque value the server encoded. */
export interface TypeRulesEntry {
  type: string;
  value: string;
}

export interface TypeRulesRead {
  entries: TypeRulesEntry[];
  /** The rule set's version: the revision of the last rules write (0: none yet). Name it in the next write. */
  version: number;
  /** The store's revision at the read: watch from the next one. */
  revision: number;
}

/** One change under `placement/`, in revision order (undefined node: the drain or pin was removed). */
export type OverrideChange =
  | { kind: "drain"; nodeId: string; drained: boolean; revision: number }
  | { kind: "pin"; p: number; nodeId: string | undefined; revision: number };
/** One change under `rules/`, in revision order; every change of one write has that write's revision (the new version). */
export type TypeRulesChange =
  | { kind: "put"; entry: TypeRulesEntry; revision: number }
  | { kind: "delete"; type: string; revision: number };

/** A write of the rule set: types stored (replaced) and types removed, all in one transaction. */
export interface TypeRulesWrite {
  puts: TypeRulesEntry[];
  deletes: string[];
}

/** Accepted at the new version, or refused because the set is no longer at the version named. */
export type TypeRulesWriteResult = { ok: true; version: number } | { ok: false };

/**
 * The most types one rules write may touch: etcd refuses a transaction of more than
 * 128 operations by default (`--max-txn-ops`), and the version key is one of them.
 */
export const TYPE_RULES_WRITE_MAX = 127;

export interface EndpointHealth {
  endpoint: string;
  healthy: boolean;
}

/** The result of a keep-alive: etcd renewed the lease, or says it is gone. */
export type KeepAliveResult = "alive" | "lost";

export interface Watch {
  cancel(): Promise<void>;
  /** Where the watch streams from (an etcd endpoint), when the implementation has several. */
  readonly endpoint?: string;
}

/**
 * The port. Every method may reject on a transport failure (etcd unreachable, a
 * deadline): the outcome of a rejected write is unknown, and callers must be correct
 * either way (the claim transaction is safe to retry: it re-reads).
 */
export interface Coordination {
  /** The cluster's meta, creating it from `desired` if this is the first node ever. */
  clusterMeta(desired: ClusterMeta): Promise<ClusterMeta>;
  /** A new lease of `ttlMs` (etcd rounds up to whole seconds), not kept alive by itself. */
  grantLease(ttlMs: number): Promise<string>;
  /** One keep-alive round trip, bounded by `timeoutMs`. */
  keepAlive(leaseId: string, timeoutMs: number): Promise<KeepAliveResult>;
  /** Time left on a lease (anyone's), or -1 when it is gone. */
  leaseTimeLeftMs(leaseId: string): Promise<number>;
  /** Ends the lease now; its keys are deleted. A lease already gone is not an error. */
  revokeLease(leaseId: string): Promise<void>;
  /**
   * Writes `members/<record.nodeId>` under `leaseId`. "create": only if the key is absent
   * (else `existing` names the holder); "update": only if the key still has `createRevision`
   * (it is still this registration).
   */
  putMember(record: MemberRecord, leaseId: string, mode: { create: true } | { updateOf: number }): Promise<PutMemberResult>;
  /** Deletes `members/<nodeId>` if it still has `createRevision` (a dead registration of this same node). */
  deleteMember(nodeId: string, createRevision: number): Promise<boolean>;
  members(): Promise<MembersRead>;
  /**
   * Calls `onChange` for every change under `members/` from `fromRevision` on, in order,
   * until `onError`, called once when the watch ends: a WatchCompactedError when etcd no
   * longer has the history from `fromRevision`, or its stream lost (its etcd endpoint
   * stopped answering, etcd-coordination.ts); the caller reads again and watches anew.
   */
  watchMembers(fromRevision: number, onChange: (change: MemberChange) => void, onError: (error: Error) => void): Promise<Watch>;
  /**
   * Claims partition `p` in one transaction, allowed when its key is absent, released,
   * or its recorded owner's registration is gone (`members/<owner>` absent, or created at
   * another revision). The epoch is the key's new mod revision. Claiming a partition this
   * same registration already owns answers its current epoch without a write.
   */
  claimPartition(p: number, claimant: Claimant): Promise<ClaimResult>;
  /** Marks `p` released (its rows handed to `to`) if it is still at `epoch` (still this claim). */
  releasePartition(p: number, claimant: Claimant, epoch: number, to?: string): Promise<boolean>;
  /** Every partition record, with its mod revision (the epoch while owned), and the revision of the read. */
  partitions(): Promise<PartitionsRead>;
  /** As `watchMembers`, for the changes under `partitions/`. */
  watchPartitions(fromRevision: number, onChange: (change: PartitionChange) => void, onError: (error: Error) => void): Promise<Watch>;
  /** Marks `nodeId` drained (or, `drained` false, removes the mark). Idempotent. */
  setDrain(nodeId: string, drained: boolean): Promise<void>;
  /** Pins partition `p` to `nodeId` (or, undefined, removes the pin). Idempotent. */
  setPin(p: number, nodeId: string | undefined): Promise<void>;
  /** Every drain and pin, and the revision of the read. */
  overrides(): Promise<OverridesRead>;
  /** As `watchMembers`, for the changes under `placement/`. */
  watchOverrides(fromRevision: number, onChange: (change: OverrideChange) => void, onError: (error: Error) => void): Promise<Watch>;
  /** Every task type's stored rules, the rule set's version, and the revision of the read (one consistent read). */
  typeRules(): Promise<TypeRulesRead>;
  /**
   * Applies `write` in one transaction if the rule set is still at `expectVersion`
   * (0: never written), bumping the version; else changes nothing and answers not ok.
   * At most TYPE_RULES_WRITE_MAX types (puts and deletes together); never an empty write.
   */
  writeTypeRules(write: TypeRulesWrite, expectVersion: number): Promise<TypeRulesWriteResult>;
  /** As `watchMembers`, for the changes under `rules/`. */
  watchTypeRules(fromRevision: number, onChange: (change: TypeRulesChange) => void, onError: (error: Error) => void): Promise<Watch>;
  health(): Promise<EndpointHealth[]>;
  close(): Promise<void>;
}

/** A watch could not start (or resume) at its revision: etcd has compacted that history. */
export class WatchCompactedError extends Error {}

/** The keys of one cluster. */
export class ClusterKeys {
  readonly root: string;
  constructor(readonly cluster: string) {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(cluster)) throw new Error(`cluster_name must be 1-64 of A-Z a-z 0-9 . _ -, got ${JSON.stringify(cluster)}`);
    this.root = `/conveyor/${cluster}/`;
  }
  get meta(): string {
    return `${this.root}meta`;
  }
  get membersPrefix(): string {
    return `${this.root}members/`;
  }
  member(nodeId: string): string {
    return `${this.membersPrefix}${nodeId}`;
  }
  get partitionsPrefix(): string {
    return `${this.root}partitions/`;
  }
  partition(p: number): string {
    return `${this.partitionsPrefix}${p}`;
  }
  get overridesPrefix(): string {
    return `${this.root}placement/`;
  }
  drain(nodeId: string): string {
    return `${this.overridesPrefix}drains/${nodeId}`;
  }
  pin(p: number): string {
    return `${this.overridesPrefix}pins/${p}`;
  }
  get rulesPrefix(): string {
    return `${this.root}rules/`;
  }
  typeRules(type: string): string {
    return `${this.rulesPrefix}${type}`;
  }
  /** Outside `rules/`, so a watch of the rules sees only types. */
  get rulesVersion(): string {
    return `${this.root}rules-version`;
  }
}

/** Checks a rules write against the port's bounds (both implementations refuse the same writes). */
export function checkTypeRulesWrite(write: TypeRulesWrite): void {
  const count = write.puts.length + write.deletes.length;
  if (count === 0) throw new Error("an empty rules write");
  if (count > TYPE_RULES_WRITE_MAX) throw new Error(`a rules write touches ${count} types; at most ${TYPE_RULES_WRITE_MAX}`);
}

/**
 * The override a key under `placement/` stands for (its value, when put, names the pinned
 * node); undefined for a key that is not one (ignored: a newer version may add kinds).
 */
export function parseOverride(keyInPrefix: string, value: string | undefined, revision: number): OverrideChange | undefined {
  const slash = keyInPrefix.indexOf("/");
  const kind = keyInPrefix.slice(0, slash);
  const name = keyInPrefix.slice(slash + 1);
  if (slash < 0 || name === "") return undefined;
  if (kind === "drains") return { kind: "drain", nodeId: name, drained: value !== undefined, revision };
  if (kind === "pins" && /^\d+$/.test(name)) {
    if (value === undefined) return { kind: "pin", p: Number(name), nodeId: undefined, revision };
    const v = JSON.parse(value) as { nodeId?: unknown };
    return typeof v.nodeId === "string" ? { kind: "pin", p: Number(name), nodeId: v.nodeId, revision } : undefined;
  }
  return undefined;
}

/** Applies one override change to a read (or a view kept from one). */
export function applyOverride(into: { drains: Set<string>; pins: Map<number, string> }, change: OverrideChange): void {
  if (change.kind === "drain") {
    if (change.drained) into.drains.add(change.nodeId);
    else into.drains.delete(change.nodeId);
  } else if (change.nodeId === undefined) {
    into.pins.delete(change.p);
  } else {
    into.pins.set(change.p, change.nodeId);
  }
}

/** Parses a stored member record; throws on a value that is not one. */
export function parseMemberRecord(text: string): MemberRecord {
  const v = JSON.parse(text) as Partial<MemberRecord>;
  if (typeof v.nodeId !== "string" || typeof v.incarnation !== "string" || !MEMBER_STATES.includes(v.state as MemberState)) {
    throw new Error(`not a member record: ${text.slice(0, 200)}`);
  }
  return {
    nodeId: v.nodeId, incarnation: v.incarnation, state: v.state as MemberState, grpc: String(v.grpc ?? ""), http: String(v.http ?? ""),
    version: String(v.version ?? ""), dataDirId: String(v.dataDirId ?? ""), startedAtMs: Number(v.startedAtMs ?? 0),
  };
}

export function parsePartitionRecord(text: string): PartitionRecord {
  const v = JSON.parse(text) as Partial<PartitionRecord>;
  if (typeof v.owner !== "string" || (v.state !== "owned" && v.state !== "released")) throw new Error(`not a partition record: ${text.slice(0, 200)}`);
  return {
    owner: v.owner, incarnation: String(v.incarnation ?? ""), memberRevision: Number(v.memberRevision ?? 0), state: v.state,
    ...(typeof v.to === "string" && v.to !== "" ? { to: v.to } : {}),
  };
}

/**
 * The claim rule, shared by both implementations so they cannot drift: may `claimant`
 * take a partition whose record is `current` (undefined: no key), given the create
 * revision of the recorded owner's member key now (0: gone)?
 */
export function claimAllowed(current: PartitionRecord | undefined, ownerMemberRevision: number): boolean {
  if (current === undefined) return true;
  if (current.state === "released") return true;
  return ownerMemberRevision !== current.memberRevision;
}

/** Does `claimant` already hold `current`? */
export function heldBy(current: PartitionRecord | undefined, claimant: Claimant): boolean {
  return current !== undefined && current.state === "owned" && current.owner === claimant.nodeId
    && current.memberRevision === claimant.memberRevision;
}
