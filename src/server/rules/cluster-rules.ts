/**
 * A cluster member's task-type rules: the rule set lives in etcd (`rules/<type>`, one
 * key per type, coordination.ts), and this node's RuleRegistry is a cache of it that the
 * enqueue path reads synchronously, as a single node reads its own. The cache is also
 * mirrored into this node's SQLite table (RuleRegistry.apply), so a restart and the
 * single-node tooling see the same rules.
 *
 * - Start: read the whole set, replace the cache with it, then watch from the read's
 *   revision. The node joins (and serves) only after this (node.ts). A watch that ends
 *   is started again from a new read; a compacted one at once.
 * - Write: validate against the cache (the registry's own plan*, so errors are the same
 *   and a bad call writes nothing), then one transaction that names the version of the
 *   set the cache holds. If another node wrote first, the transaction is refused: read
 *   the set again, validate again, retry. The call answers once etcd accepted the write
 *   AND this node's cache holds it (the watch brought it, or a read after a short wait),
 *   so a caller that reads its own node next sees its write.
 * - Writes from one node are serialized (no needless conflicts with itself). A worker's
 *   registration that changes nothing (the same rules from the same source, as every
 *   worker start sends) writes nothing: `updated_at_ms` is then the last change.
 */
import { ConveyorError, invalidField, nodeStopping } from "../../base/errors.js";
import type { Clock } from "../../base/clock.js";
import type { ClusterLogger } from "../../cluster/cluster-member.js";
import {
  TYPE_RULES_WRITE_MAX, WatchCompactedError, type Coordination, type TypeRulesChange, type TypeRulesRead, type Watch,
} from "../../cluster/coordination.js";
import type { RuleDef, RuleSource, TypeRules } from "../../grains/queue/rules.js";
import type { RuleRegistry, RulesPlan } from "./rule-registry.js";
import { decodeRuleRecord, encodeRuleRecord } from "./rule-record.js";
import type { RuleWriter } from "./rule-writer.js";

export type RulesCoordination = Pick<Coordination, "typeRules" | "writeTypeRules" | "watchTypeRules">;

export interface ClusterRulesDeps {
  registry: Pick<RuleRegistry, "planSet" | "planRegisterAll" | "apply" | "replaceAll" | "get">;
  clock: Clock;
  logger: ClusterLogger;
  /** Wait before reading and watching again after a watch ended (not compacted) or a read failed. */
  rewatchMs: number;
  /** How long a write that etcd accepted waits for the watch to bring it before reading the set instead. */
  catchUpMs: number;
}

/** Attempts of one write that other nodes' writes keep overtaking. */
const WRITE_ATTEMPTS_MAX = 5;

export class ClusterRules implements RuleWriter {
  private coordination: RulesCoordination | undefined;
  /** The version (revision of the last rules write) of the set the cache holds. */
  private version = 0;
  /** The revision of the last whole read: watched changes at or below it are in the cache already. */
  private readRevision = 0;
  private watch: Watch | undefined;
  private stopped = false;
  private tail: Promise<unknown> = Promise.resolve();
  private readonly waiters = new Set<{ version: number; resolve: () => void }>();

  constructor(private readonly deps: ClusterRulesDeps) {}

  /** Reads the cluster's rules into the cache and follows them; resolves once the first read is in (retried until `deadlineMs`). */
  async start(coordination: RulesCoordination, deadlineMs: number): Promise<void> {
    this.coordination = coordination;
    for (;;) {
      try {
        await this.resync();
        return;
      } catch (err) {
        if (this.deps.clock.nowMs() >= deadlineMs) throw err;
        this.deps.logger.warn({ err, reading: "task-type rules" }, "cannot read the cluster from etcd yet; retrying");
        await new Promise<void>((resolve) => this.deps.clock.setTimer(this.deps.rewatchMs, resolve));
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const watch = this.watch;
    this.watch = undefined;
    await watch?.cancel().catch(() => {});
  }

  set(type: string, rules: RuleDef[], source: RuleSource): Promise<TypeRules> {
    return this.serial(async () => {
      let saved: TypeRules | undefined;
      await this.write(() => {
        const entry = this.deps.registry.planSet(type, rules, source);
        const current = this.deps.registry.get(type);
        saved = current && sameRules(current, entry) ? current : entry;
        return saved === current ? { puts: [], deletes: [] } : { puts: [entry], deletes: [] };
      }, "rules");
      return saved!;
    });
  }

  registerAll(types: ReadonlyArray<{ type: string; rules: RuleDef[]; field: string }>): Promise<void> {
    return this.serial(() => this.write(() => {
      const plan = this.deps.registry.planRegisterAll(types);
      return { ...plan, puts: plan.puts.filter((t) => !sameRules(this.deps.registry.get(t.type), t)) };
    }, "types"));
  }

  delete(type: string): Promise<boolean> {
    return this.serial(async () => {
      let had = false;
      await this.write(() => {
        had = this.deps.registry.get(type) !== undefined;
        return { puts: [], deletes: had ? [type] : [] };
      }, "type");
      return had;
    });
  }

  /** Runs writes of this node one after another. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => {});
    return run;
  }

  /** Plans against the cache (throwing what validation throws), writes at the cache's version, retries when overtaken. */
  private async write(plan: () => RulesPlan, field: string): Promise<void> {
    const coordination = this.joined();
    for (let attempt = 1; ; attempt++) {
      const p = plan();
      const count = p.puts.length + p.deletes.length;
      if (count === 0) return;
      if (count > TYPE_RULES_WRITE_MAX) {
        throw invalidField(field, `changes the rules of ${count} task types in one call; a cluster takes at most ${TYPE_RULES_WRITE_MAX} per call (one etcd transaction): split the call`);
      }
      let result;
      try {
        result = await coordination.writeTypeRules({ puts: p.puts.map((t) => ({ type: t.type, value: encodeRuleRecord(t) })), deletes: p.deletes }, this.version);
      } catch (err) {
        throw unavailable(`the cluster's rule store (etcd) did not answer the write (${errorText(err)}); it may or may not have been applied: retry`);
      }
      if (result.ok) {
        await this.caughtUp(result.version);
        return;
      }
      if (attempt >= WRITE_ATTEMPTS_MAX) throw unavailable(`other nodes changed the task-type rules ${attempt} times while this write was made; retry`);
      await this.refresh().catch((err: unknown) => {
        throw unavailable(`could not read the cluster's task-type rules again (${errorText(err)}); retry`);
      });
    }
  }

  /** Resolves once the cache holds version `version`: brought by the watch, or else read after `catchUpMs`. */
  private async caughtUp(version: number): Promise<void> {
    if (this.version >= version) return;
    let cancelTimer = () => {};
    const watched = new Promise<boolean>((resolve) => {
      const waiter = { version, resolve: () => resolve(true) };
      this.waiters.add(waiter);
      cancelTimer = this.deps.clock.setTimer(this.deps.catchUpMs, () => {
        this.waiters.delete(waiter);
        resolve(false);
      });
    });
    if (await watched) {
      cancelTimer();
      return;
    }
    try {
      await this.refresh();
    } catch (err) {
      throw unavailable(`the write was accepted by the cluster but this node could not read it back yet (${errorText(err)}); retry`);
    }
  }

  private joined(): RulesCoordination {
    if (this.stopped) throw nodeStopping();
    if (!this.coordination) throw unavailable("this node has not read the cluster's task-type rules yet (it is joining); retry");
    return this.coordination;
  }

  /** Reads the whole set, then watches from there. */
  private async resync(): Promise<void> {
    const coordination = this.joined();
    const old = this.watch;
    this.watch = undefined;
    await old?.cancel().catch(() => {});
    const read = await this.refresh();
    if (this.stopped) return;
    this.watch = await coordination.watchTypeRules(read.revision + 1, (change) => this.onChange(change), (err) => this.watchEnded(err));
    if (this.stopped) await this.watch.cancel().catch(() => {});
  }

  /** Reads the whole set and makes the cache that set, unless the watch already brought the cache past it. */
  private async refresh(): Promise<TypeRulesRead> {
    const read = await this.joined().typeRules();
    if (read.revision <= this.readRevision || this.version > read.revision) return read;
    const entries: TypeRules[] = [];
    for (const e of read.entries) {
      const decoded = this.decode(e.type, e.value);
      if (decoded) entries.push(decoded);
    }
    this.mirrored(() => this.deps.registry.replaceAll(entries));
    this.readRevision = read.revision;
    this.advance(read.version);
    return read;
  }

  private onChange(change: TypeRulesChange): void {
    if (this.stopped || change.revision <= this.readRevision) return;
    if (change.kind === "put") {
      const decoded = this.decode(change.entry.type, change.entry.value);
      if (decoded) this.mirrored(() => this.deps.registry.apply({ puts: [decoded], deletes: [] }));
    } else {
      this.mirrored(() => this.deps.registry.apply({ puts: [], deletes: [change.type] }));
    }
    this.advance(change.revision);
  }

  /**
   * Applies a change to the registry, whose memory follows the cluster even when its
   * SQLite mirror cannot be written (disk full): that is logged, and the next start reads
   * the set from etcd anyway.
   */
  private mirrored(apply: () => void): void {
    try {
      apply();
    } catch (err) {
      this.deps.logger.error({ err }, "could not mirror the cluster's task-type rules into this node's data file; it serves them from memory");
    }
  }

  /** A stored record this node cannot read: logged, and the type keeps what the cache had (never a half-read rule). */
  private decode(type: string, value: string): TypeRules | undefined {
    try {
      return decodeRuleRecord(type, value);
    } catch (err) {
      this.deps.logger.error({ err, type }, "a task type's rules in etcd cannot be read by this node; it keeps its previous rules for that type");
      return this.deps.registry.get(type);
    }
  }

  private advance(version: number): void {
    this.version = Math.max(this.version, version);
    for (const w of this.waiters) {
      if (w.version <= this.version) {
        this.waiters.delete(w);
        w.resolve();
      }
    }
  }

  private watchEnded(err: Error): void {
    if (this.stopped) return;
    const compacted = err instanceof WatchCompactedError;
    this.deps.logger.warn({ err, compacted }, "the task-type rules watch ended; reading the rules again");
    const again = () => {
      if (this.stopped) return;
      this.resync().catch((e: unknown) => {
        this.deps.logger.error({ err: e }, "could not read and watch the task-type rules again; retrying");
        this.deps.clock.setTimer(this.deps.rewatchMs, again);
      });
    };
    this.deps.clock.setTimer(compacted ? 0 : this.deps.rewatchMs, again);
  }
}

/** The same rules from the same source (the time of the write aside). */
function sameRules(a: TypeRules | undefined, b: TypeRules): boolean {
  return a !== undefined && a.source === b.source && JSON.stringify(a.rules) === JSON.stringify(b.rules);
}

const unavailable = (message: string) => new ConveyorError("UNAVAILABLE", "STORAGE_FAILURE", message);
const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));
