/**
 * The coordination port on a real etcd, through etcd3 1.1.2: KV, leases, transactions
 * and watch only (see coordination.ts for why never Election/Lock).
 *
 * Client settings: every unary call has a deadline (`callTimeoutMs`), so a dead etcd
 * makes calls fail rather than hang; etcd3's retries stay (three attempts, on another
 * endpoint where there are several), its per-endpoint circuit breaker does not, and
 * channels reconnect quickly (etcd-answers.ts says why). Leases are granted with
 * `autoKeepAlive: false`: the membership shell sends each keep-alive itself and records
 * when it sent it, which is what self-fencing must measure from (a renewal cannot
 * happen before it is sent). Keep-alives bypass the shared client and go to every
 * endpoint at once (etcd-keep-alives.ts says why). etcd leases are whole seconds: a TTL
 * is rounded up.
 *
 * Watches stream from one endpoint each, on a client of that endpoint alone: the one that
 * answered a keep-alive last. A watch whose endpoint stops answering keep-alives for
 * WATCH_ENDPOINT_SILENT_MS while another endpoint answers, or whose stream breaks, ends
 * (`onError`), and its owner reads again and watches anew, from an endpoint that answers.
 * The shared client's watch stays on the endpoint it picked: cut off from it by a network
 * partition (no reset, nothing comes back), it delivered nothing and never failed, and
 * the network fault test saw a node keep a cut-off member in its view and never take its
 * partitions over.
 */
import { Etcd3, EtcdLeaseInvalidError, type IKeyValue, type Lease } from "etcd3";
import { etcdClientOptions } from "./etcd-answers.js";
import { EndpointKeepAlives } from "./etcd-keep-alives.js";
import {
  applyOverride, checkTypeRulesWrite, claimAllowed, ClusterKeys, heldBy, parseMemberRecord, parseOverride, parsePartitionRecord,
  type Claimant, type ClaimResult, type ClusterMeta, type Coordination, type EndpointHealth, type KeepAliveResult,
  type MemberChange, type MemberEntry, type MemberRecord, type MembersRead, type OverrideChange, type OverridesRead,
  type PartitionChange, type PartitionRecord, type PartitionsRead, type PutMemberResult,
  type TypeRulesChange, type TypeRulesRead, type TypeRulesWrite, type TypeRulesWriteResult, type Watch,
  WatchCompactedError,
} from "./coordination.js";

export interface EtcdCoordinationOptions {
  endpoints: string[];
  cluster: string;
  /** Deadline of each unary call. */
  callTimeoutMs?: number;
}

const CALL_TIMEOUT_MS_DEFAULT = 3_000;
/** A watch's endpoint silent this long (no keep-alive answered) while another answers: the watch moves. */
const WATCH_ENDPOINT_SILENT_MS = 3_000;
/** How often a watch checks its endpoint. */
const WATCH_CHECK_MS = 500;
const HEALTH_TIMEOUT_MS = 2_000;

export class EtcdCoordination implements Coordination {
  private readonly client: Etcd3;
  private readonly keys: ClusterKeys;
  private readonly leases = new Map<string, Lease>();
  private readonly keepAlives: EndpointKeepAlives;
  private readonly timeoutMs: number;
  /** One client per endpoint for watches (etcd3 multiplexes a client's watches on one stream). */
  private readonly watchClients = new Map<string, Etcd3>();

  constructor(private readonly options: EtcdCoordinationOptions) {
    if (options.endpoints.length === 0) throw new Error("no etcd endpoints");
    this.keys = new ClusterKeys(options.cluster);
    const timeoutMs = options.callTimeoutMs ?? CALL_TIMEOUT_MS_DEFAULT;
    this.timeoutMs = timeoutMs;
    this.client = new Etcd3(etcdClientOptions(options.endpoints, {
      dialTimeout: timeoutMs,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeoutMs }),
    }));
    this.keepAlives = new EndpointKeepAlives(options.endpoints, timeoutMs);
  }

  async clusterMeta(desired: ClusterMeta): Promise<ClusterMeta> {
    const key = this.keys.meta;
    const res = await this.client.if(key, "Create", "==", 0)
      .then(this.client.put(key).value(JSON.stringify(desired)))
      .else(this.client.get(key))
      .commit();
    if (res.succeeded) return desired;
    const kv = res.responses[0]?.response_range?.kvs[0];
    if (!kv) throw new Error(`${key} vanished while it was read`);
    const v = JSON.parse(kv.value.toString()) as Partial<ClusterMeta>;
    return { partitions: Number(v.partitions), createdAtMs: Number(v.createdAtMs ?? 0) };
  }

  async grantLease(ttlMs: number): Promise<string> {
    const lease = this.client.lease(Math.max(1, Math.ceil(ttlMs / 1000)), { autoKeepAlive: false });
    lease.on("lost", () => {}); // reported through keepAlive's result instead
    const id = await lease.grant();
    this.leases.set(id, lease);
    return id;
  }

  keepAlive(leaseId: string, timeoutMs: number): Promise<KeepAliveResult> {
    return this.keepAlives.once(leaseId, timeoutMs);
  }

  async leaseTimeLeftMs(leaseId: string): Promise<number> {
    const res = await this.client.leaseClient.leaseTimeToLive({ ID: leaseId });
    const ttl = Number(res.TTL);
    return ttl < 0 ? -1 : ttl * 1000;
  }

  async revokeLease(leaseId: string): Promise<void> {
    const lease = this.leases.get(leaseId);
    this.leases.delete(leaseId);
    if (lease) {
      await lease.revoke();
    } else {
      try {
        await this.client.leaseClient.leaseRevoke({ ID: leaseId });
      } catch (err) {
        if (!(err instanceof EtcdLeaseInvalidError)) throw err;
      }
    }
  }

  async putMember(record: MemberRecord, leaseId: string, mode: { create: true } | { updateOf: number }): Promise<PutMemberResult> {
    const key = this.keys.member(record.nodeId);
    const expected = "create" in mode ? 0 : mode.updateOf;
    const res = await this.client.if(key, "Create", "==", expected)
      .then(this.client.put(key).value(JSON.stringify(record)).lease(leaseId))
      .else(this.client.get(key))
      .commit();
    const revision = Number(res.header.revision);
    if (res.succeeded) return { ok: true, revision, createRevision: "create" in mode ? revision : mode.updateOf };
    const kv = res.responses[0]?.response_range?.kvs[0];
    return { ok: false, revision, createRevision: kv ? Number(kv.create_revision) : 0, ...(kv ? { existing: toMemberEntry(kv) } : {}) };
  }

  async deleteMember(nodeId: string, createRevision: number): Promise<boolean> {
    const key = this.keys.member(nodeId);
    const res = await this.client.if(key, "Create", "==", createRevision).then(this.client.delete().key(key)).commit();
    return res.succeeded;
  }

  async members(): Promise<MembersRead> {
    const res = await this.client.getAll().prefix(this.keys.membersPrefix).exec();
    return { members: res.kvs.map(toMemberEntry), revision: Number(res.header.revision) };
  }

  watchMembers(fromRevision: number, onChange: (change: MemberChange) => void, onError: (error: Error) => void): Promise<Watch> {
    const prefix = this.keys.membersPrefix;
    return this.watchPrefix(prefix, fromRevision, (event, revision) => {
      if (event.type === "Put") onChange({ kind: "put", entry: toMemberEntry(event.kv), revision });
      else onChange({ kind: "delete", nodeId: event.kv.key.toString().slice(prefix.length), revision });
    }, onError);
  }

  watchPartitions(fromRevision: number, onChange: (change: PartitionChange) => void, onError: (error: Error) => void): Promise<Watch> {
    const prefix = this.keys.partitionsPrefix;
    return this.watchPrefix(prefix, fromRevision, (event, revision) => {
      const p = Number(event.kv.key.toString().slice(prefix.length));
      if (event.type === "Put") onChange({ kind: "put", p, record: parsePartitionRecord(event.kv.value.toString()), epoch: revision, revision });
      else onChange({ kind: "delete", p, revision });
    }, onError);
  }

  /**
   * Every event under `prefix` from `fromRevision` on, in order, from the endpoint that
   * answered a keep-alive last (the others in turn if it cannot be watched from within the
   * call timeout); `onError` once when the watch ends (compaction named), its endpoint
   * left behind (see the header) or its stream broken. Rejects if no endpoint can be watched from.
   */
  private async watchPrefix(
    prefix: string, fromRevision: number, onEvent: (event: { type: string; kv: IKeyValue }, revision: number) => void, onError: (error: Error) => void,
  ): Promise<Watch> {
    const failures: string[] = [];
    for (const endpoint of this.keepAlives.byFreshness()) {
      const watcher = this.watchClient(endpoint).watch().prefix(prefix).startRevision(String(fromRevision)).watcher();
      // Listening from the start: the events from `fromRevision` may arrive in the same
      // read as etcd's "created", before this function runs again.
      let live = true;
      let check: NodeJS.Timeout | undefined;
      const stop = () => {
        live = false;
        clearInterval(check);
      };
      watcher.on("data", (res) => {
        if (!live) return;
        // An event handler runs in etcd3's stream callback: a record it cannot parse (or a
        // listener that throws) ends this watch, whose owner reads and watches again
        // (logging why), instead of throwing out of the callback and ending the process.
        try {
          for (const event of res.events) onEvent(event, Number(event.kv.mod_revision));
        } catch (err) {
          stop();
          watcher.cancel().catch(() => {});
          onError(new Error(`a watched change under ${prefix} could not be applied: ${err instanceof Error ? err.message : String(err)}`));
        }
      });
      try {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`not established within ${this.timeoutMs}ms`)), this.timeoutMs);
          const settle = (err?: Error) => {
            clearTimeout(timer);
            if (err) reject(err);
            else resolve();
          };
          watcher.once("connected", () => settle());
          watcher.once("error", (err: Error) => settle(err));
          watcher.once("disconnected", (err: Error) => settle(err));
        });
      } catch (err) {
        stop();
        watcher.on("error", () => {}); // abandoned: its later errors are nobody's
        watcher.cancel().catch(() => {});
        // A cancelled watch (a compaction) is etcd's answer, the same from every endpoint.
        if (err instanceof Error && /cancel/i.test(err.message)) {
          this.endedWith(prefix, fromRevision, err, onError);
          return { endpoint, cancel: async () => {} };
        }
        failures.push(`${endpoint}: ${err instanceof Error ? err.message : String(err)}`);
        continue;
      }
      const end = (err: Error) => {
        if (!live) return;
        stop();
        watcher.cancel().catch(() => {});
        onError(err);
      };
      // etcd3 reports a cancelled watch as "Watcher canceled: <reason>" (a compaction, say).
      watcher.on("error", (err: Error) => {
        if (!live) return;
        stop();
        this.endedWith(prefix, fromRevision, err, onError);
      });
      // etcd3 would connect again to the same endpoint by itself; the owner reads and watches anew instead.
      watcher.on("disconnected", (err: Error) => end(new Error(`the watch stream from ${endpoint} broke: ${err.message}`)));
      check = setInterval(() => {
        if (this.keepAlives.leftBehind(endpoint, WATCH_ENDPOINT_SILENT_MS)) {
          end(new Error(`etcd endpoint ${endpoint} answered no keep-alive for ${WATCH_ENDPOINT_SILENT_MS}ms while another did; watching from another`));
        }
      }, WATCH_CHECK_MS);
      check.unref();
      return {
        endpoint,
        cancel: async () => {
          stop();
          // A cancel waits for etcd's answer, which an endpoint cut off never sends: bounded.
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([watcher.cancel(), new Promise<void>((resolve) => (timer = setTimeout(resolve, this.timeoutMs)))]);
          clearTimeout(timer);
        },
      };
    }
    throw new Error(`no watch of ${prefix} could be established (${failures.join("; ")})`);
  }

  /** A watch etcd ended: `onError`, naming a compaction (etcd gives no reason; a read at the watch's revision fails the same way). */
  private endedWith(prefix: string, fromRevision: number, err: Error, onError: (error: Error) => void): void {
    this.compacted(prefix, fromRevision).then(
      (compacted) => onError(compacted ? new WatchCompactedError(`${err.message} (history before revision ${fromRevision} compacted)`) : err),
      () => onError(err));
  }

  private watchClient(endpoint: string): Etcd3 {
    let client = this.watchClients.get(endpoint);
    if (!client) this.watchClients.set(endpoint, (client = new Etcd3(etcdClientOptions([endpoint]))));
    return client;
  }

  /** Is the history at `revision` gone (compacted)? */
  private async compacted(prefix: string, revision: number): Promise<boolean> {
    try {
      await this.client.getAll().prefix(prefix).revision(revision).limit(1).exec();
      return false;
    } catch (err) {
      return /compacted/i.test(err instanceof Error ? err.message : String(err));
    }
  }

  async claimPartition(p: number, claimant: Claimant): Promise<ClaimResult> {
    const key = this.keys.partition(p);
    const got = await this.client.get(key).exec();
    const kv = got.kvs[0];
    const current = kv ? parsePartitionRecord(kv.value.toString()) : undefined;
    const seenMod = kv ? Number(kv.mod_revision) : 0;
    if (current && heldBy(current, claimant)) return { ok: true, epoch: seenMod };
    let ownerRevision = 0;
    if (current && current.state === "owned") {
      const owner = await this.client.get(this.keys.member(current.owner)).exec();
      ownerRevision = owner.kvs[0] ? Number(owner.kvs[0].create_revision) : 0;
    }
    if (!claimAllowed(current, ownerRevision)) return { ok: false, holder: current!, epoch: seenMod };
    const record: PartitionRecord = { owner: claimant.nodeId, incarnation: claimant.incarnation, memberRevision: claimant.memberRevision, state: "owned" };
    // One transaction: the key is as we read it, the claimant is still registered, and
    // (when taking over) the recorded owner's registration is still not the recorded one.
    let txn = this.client.if(key, "Mod", "==", seenMod).and(this.keys.member(claimant.nodeId), "Create", "==", claimant.memberRevision);
    if (current && current.state === "owned") txn = txn.and(this.keys.member(current.owner), "Create", "!=", current.memberRevision);
    const res = await txn.then(this.client.put(key).value(JSON.stringify(record))).commit();
    if (res.succeeded) return { ok: true, epoch: Number(res.header.revision) };
    // Someone else moved first: report what is there now.
    const now = await this.client.get(key).exec();
    const nowKv = now.kvs[0];
    return nowKv
      ? { ok: false, holder: parsePartitionRecord(nowKv.value.toString()), epoch: Number(nowKv.mod_revision) }
      : { ok: false, holder: { owner: "", incarnation: "", memberRevision: 0, state: "released" }, epoch: 0 };
  }

  async releasePartition(p: number, claimant: Claimant, epoch: number, to?: string): Promise<boolean> {
    const key = this.keys.partition(p);
    const record: PartitionRecord = { owner: claimant.nodeId, incarnation: claimant.incarnation, memberRevision: claimant.memberRevision, state: "released", ...(to ? { to } : {}) };
    const res = await this.client.if(key, "Mod", "==", epoch).then(this.client.put(key).value(JSON.stringify(record))).commit();
    return res.succeeded;
  }

  async partitions(): Promise<PartitionsRead> {
    const prefix = this.keys.partitionsPrefix;
    const res = await this.client.getAll().prefix(prefix).exec();
    const records = new Map<number, { record: PartitionRecord; epoch: number }>();
    for (const kv of res.kvs) records.set(Number(kv.key.toString().slice(prefix.length)), { record: parsePartitionRecord(kv.value.toString()), epoch: Number(kv.mod_revision) });
    return { records, revision: Number(res.header.revision) };
  }

  async setDrain(nodeId: string, drained: boolean): Promise<void> {
    const key = this.keys.drain(nodeId);
    if (drained) await this.client.put(key).value(JSON.stringify({ nodeId, atMs: Date.now() })).exec();
    else await this.client.delete().key(key).exec();
  }

  async setPin(p: number, nodeId: string | undefined): Promise<void> {
    const key = this.keys.pin(p);
    if (nodeId !== undefined) await this.client.put(key).value(JSON.stringify({ nodeId, atMs: Date.now() })).exec();
    else await this.client.delete().key(key).exec();
  }

  async overrides(): Promise<OverridesRead> {
    const prefix = this.keys.overridesPrefix;
    const res = await this.client.getAll().prefix(prefix).exec();
    const read: OverridesRead = { drains: new Set(), pins: new Map(), revision: Number(res.header.revision) };
    for (const kv of res.kvs) {
      const change = parseOverride(kv.key.toString().slice(prefix.length), kv.value.toString(), Number(kv.mod_revision));
      if (change) applyOverride(read, change);
    }
    return read;
  }

  watchOverrides(fromRevision: number, onChange: (change: OverrideChange) => void, onError: (error: Error) => void): Promise<Watch> {
    const prefix = this.keys.overridesPrefix;
    return this.watchPrefix(prefix, fromRevision, (event, revision) => {
      const change = parseOverride(event.kv.key.toString().slice(prefix.length), event.type === "Put" ? event.kv.value.toString() : undefined, revision);
      if (change) onChange(change);
    }, onError);
  }

  async typeRules(): Promise<TypeRulesRead> {
    const prefix = this.keys.rulesPrefix;
    // Both reads in one transaction, so the version matches the entries. The condition only
    // picks a branch; both branches read the same.
    const reads = () => [this.client.get(this.keys.rulesVersion), this.client.getAll().prefix(prefix)];
    const res = await this.client.if(this.keys.rulesVersion, "Create", "==", 0).then(...reads()).else(...reads()).commit();
    const version = res.responses[0]?.response_range?.kvs[0];
    const kvs = res.responses[1]?.response_range?.kvs ?? [];
    return {
      entries: kvs.map((kv) => ({ type: kv.key.toString().slice(prefix.length), value: kv.value.toString() })),
      version: version ? Number(version.mod_revision) : 0,
      revision: Number(res.header.revision),
    };
  }

  async writeTypeRules(write: TypeRulesWrite, expectVersion: number): Promise<TypeRulesWriteResult> {
    checkTypeRulesWrite(write);
    const res = await this.client.if(this.keys.rulesVersion, "Mod", "==", expectVersion)
      .then(
        this.client.put(this.keys.rulesVersion).value(""),
        ...write.puts.map((e) => this.client.put(this.keys.typeRules(e.type)).value(e.value)),
        ...write.deletes.map((type) => this.client.delete().key(this.keys.typeRules(type))),
      )
      .commit();
    return res.succeeded ? { ok: true, version: Number(res.header.revision) } : { ok: false };
  }

  watchTypeRules(fromRevision: number, onChange: (change: TypeRulesChange) => void, onError: (error: Error) => void): Promise<Watch> {
    const prefix = this.keys.rulesPrefix;
    return this.watchPrefix(prefix, fromRevision, (event, revision) => {
      const type = event.kv.key.toString().slice(prefix.length);
      if (event.type === "Put") onChange({ kind: "put", entry: { type, value: event.kv.value.toString() }, revision });
      else onChange({ kind: "delete", type, revision });
    }, onError);
  }

  async health(): Promise<EndpointHealth[]> {
    return Promise.all(this.options.endpoints.map(async (endpoint) => {
      try {
        const res = await fetch(`${endpoint.replace(/\/+$/, "")}/health`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
        const body = (await res.json()) as { health?: string };
        return { endpoint, healthy: body.health === "true" };
      } catch {
        return { endpoint, healthy: false };
      }
    }));
  }

  async close(): Promise<void> {
    for (const lease of this.leases.values()) lease.release();
    this.leases.clear();
    this.keepAlives.close();
    for (const client of this.watchClients.values()) client.close();
    this.client.close();
  }
}

function toMemberEntry(kv: IKeyValue): MemberEntry {
  return {
    record: parseMemberRecord(kv.value.toString()),
    createRevision: Number(kv.create_revision), modRevision: Number(kv.mod_revision), leaseId: String(kv.lease),
  };
}
