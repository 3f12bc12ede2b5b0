/**
 * The packed index (task-index.ts, packed-tasks.ts, the packed heaps of ready-queues.ts)
 * is a change of representation only: a core that packs plain pending tasks must behave
 * exactly like one that keeps every task as an entry object (`packPending: false`).
 *
 * Both cores get the same random command sequences (enqueues of every kind of task:
 * types, priorities, keys, unique keys, chosen ids, delays, expiries, deadlines, timeouts,
 * groups, cancel rules, failed rules; leases with and without declared types and batch
 * handlers, byte budgets; settlements of every outcome, stale ones too; time; heartbeats;
 * key limits; operator actions; revivals; pauses; group configs; passivation) with the same
 * seeded randomness, and after every command every answer, every effect and event, the
 * snapshot (in arrival order), the stats, the next wake-up and the bulk-action views must
 * be equal. Coverage counters check that tasks really were packed, unpacked by operators
 * and timers, held packed at saturated keys and dispatched from the packed heaps.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { seededRandom } from "../../src/base/random.js";
import type { Effect } from "../../src/grains/queue/effects.js";
import { QueueCore } from "../../src/grains/queue/queue-core.js";
import type { LeaseCaps } from "../../src/grains/queue/ready-queues.js";
import type { Strategy, TaskRule } from "../../src/grains/queue/rules.js";
import { TASK_STATES, type NewTask, type Outcome, type TaskIndexEntry, type TaskRecord } from "../../src/grains/queue/task.js";
import { QUEUE, coreConfig, newTask } from "../support/core-fixtures.js";

const TTL = 1_000;
const TYPES = ["a", "b", "c"] as const;
const KEYS = ["", "", "A", "B"] as const;

interface ItemSpec {
  type: string;
  priority: number;
  key: string;
  processInMs: number;
  expiresInMs: number;
  deadlineInMs: number;
  timeoutMs: number;
  uniqueKey: string;
  chosenId: string;
  maxRetry: number;
  group: string;
  rule: Strategy | "";
  ruleError: boolean;
  payloadBytes: number;
}

type Cmd =
  | { kind: "enqueue"; items: ItemSpec[]; atomic: boolean }
  | { kind: "lease"; max: number; types: string[] | undefined; batchTypes: string[]; maxBytes: number }
  | { kind: "settle"; pick: number; outcome: Outcome; stale: boolean }
  | { kind: "advance"; ms: number }
  | { kind: "heartbeat"; pick: number }
  | { kind: "keyLimit"; limit: number | undefined }
  | { kind: "operator"; action: "cancel" | "runNow" | "archive" | "delete"; pick: number }
  | { kind: "revive"; pick: number }
  | { kind: "pause"; paused: boolean }
  | { kind: "groupConfig"; maxSize: number | undefined }
  | { kind: "passivate" };

const often = <T>(common: T, rare: fc.Arbitrary<T>, ratio = 4): fc.Arbitrary<T> =>
  fc.oneof({ weight: ratio, arbitrary: fc.constant(common) }, { weight: 1, arbitrary: rare });

const itemArb: fc.Arbitrary<ItemSpec> = fc.record({
  type: fc.constantFrom(...TYPES),
  priority: fc.constantFrom(1, 4, 4, 9),
  key: fc.constantFrom(...KEYS),
  processInMs: often(0, fc.integer({ min: 1, max: 1_500 }), 3),
  expiresInMs: often(0, fc.integer({ min: 1, max: 3_000 })),
  deadlineInMs: often(0, fc.integer({ min: 100, max: 4_000 })),
  timeoutMs: often(0, fc.integer({ min: 100, max: 1_500 }), 3),
  uniqueKey: often("", fc.constantFrom("u1", "u2")),
  chosenId: often("", fc.constantFrom("c1", "c2", "c3")),
  maxRetry: fc.integer({ min: 0, max: 2 }),
  group: often("", fc.constant("g"), 6),
  rule: often<Strategy | "">("", fc.constantFrom<Strategy>("CANCEL_NEWEST", "CANCEL_IN_PROGRESS", "CANCEL_QUEUED_EXCEPT_OLDEST"), 6),
  ruleError: often(false, fc.constant(true), 30),
  payloadBytes: fc.integer({ min: 0, max: 40 }),
});

const pick = fc.nat({ max: 1_000 });
const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("enqueue" as const), items: fc.array(itemArb, { minLength: 1, maxLength: 6 }), atomic: fc.boolean() }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("lease" as const),
      max: fc.integer({ min: 1, max: 5 }),
      types: fc.option(fc.subarray([...TYPES]), { nil: undefined }),
      batchTypes: often<string[]>([], fc.subarray([...TYPES]), 2),
      maxBytes: often(Infinity, fc.integer({ min: 1, max: 80 }), 3),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("settle" as const), pick, outcome: fc.constantFrom<Outcome>("success", "retry", "skip_retry", "released"), stale: often(false, fc.constant(true), 6) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.oneof(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 400, max: 2_000 })) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("heartbeat" as const), pick }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("keyLimit" as const), limit: fc.option(fc.integer({ min: 1, max: 2 }), { nil: undefined }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("operator" as const), action: fc.constantFrom("cancel" as const, "runNow" as const, "archive" as const, "delete" as const), pick }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("revive" as const), pick }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("pause" as const), paused: often(false, fc.constant(true), 3) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("groupConfig" as const), maxSize: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("passivate" as const) }) },
);

/** How often the packed representation was really exercised. */
const coverage = { packed: 0, dispatchedPacked: 0, heldPacked: 0, unpackedByOperator: 0, expiredPacked: 0, revived: 0, passivations: 0 };

/** One core of the pair, with everything it needs to be rebuilt the same way as its twin. */
class Side {
  core: QueueCore;
  private leaseNo = 0;
  private coreNo = 0;

  constructor(private readonly seed: number, private readonly packPending: boolean) {
    this.core = this.build();
  }

  build(): QueueCore {
    this.coreNo += 1;
    return new QueueCore(QUEUE, { ...coreConfig(TTL), packPending: this.packPending }, {
      random: seededRandom(this.seed * 31 + this.coreNo), newId: () => `L${++this.leaseNo}`,
    });
  }

  /** Passivation and activation: a fresh core loaded from this one's snapshot and settings. */
  reload(nowMs: number, keyLimit: number | undefined, groupMaxSize: number | undefined): void {
    const rows = this.core.snapshot();
    const { paused } = this.core;
    this.core.dispose();
    this.core = this.build();
    this.core.load(rows, {
      paused, ...(keyLimit !== undefined ? { keyLimit } : {}),
      ...(groupMaxSize !== undefined ? { groupConfigs: new Map([["", { maxSize: groupMaxSize, maxDelayMs: 800, graceMs: 300 }]]) } : {}),
    }, nowMs);
  }
}

class Twins {
  readonly packed: Side;
  readonly reference: Side;
  nowMs = 1_000_000;
  private taskNo = 0;
  keyLimit: number | undefined;
  groupMaxSize: number | undefined;
  /** Live leases (from the answers), and leases that ended. */
  private readonly leases = new Map<string, string[]>();
  private readonly deadLeases: string[] = [];
  private readonly ids: string[] = [];
  /** Finished archived or cancelled tasks, as their last effect left them, with their task. */
  private readonly revivable = new Map<string, { entry: TaskIndexEntry; task: NewTask }>();
  private readonly tasks = new Map<string, NewTask>();

  constructor(seed: number) {
    this.packed = new Side(seed, true);
    this.reference = new Side(seed, false);
  }

  /** Runs `act` on both cores; their answers must be equal, and so must the turns' output. */
  private both<T>(act: (core: QueueCore) => T): T {
    const got = act(this.packed.core);
    const want = act(this.reference.core);
    expect(got).toEqual(want);
    const out = this.packed.core.drain();
    expect(out).toEqual(this.reference.core.drain());
    this.observe(out.effects);
    return got;
  }

  run(cmd: Cmd): void {
    switch (cmd.kind) {
      case "enqueue": {
        const tasks = cmd.items.map((it) => this.task(it));
        this.both((c) => c.enqueue(tasks, new Map(), this.nowMs, cmd.atomic));
        return;
      }
      case "lease": {
        const caps: LeaseCaps = { batchTypes: new Set(cmd.batchTypes), ...(cmd.types ? { types: new Set(cmd.types) } : {}) };
        const packedBefore = this.packedIds();
        const plans = this.both((c) => c.lease(cmd.max, this.nowMs, caps, cmd.maxBytes, "w"));
        for (const p of plans) {
          this.leases.set(p.leaseId, p.taskIds);
          coverage.dispatchedPacked += p.taskIds.filter((id) => packedBefore.has(id)).length;
        }
        // A short answer drained what could run: a packed task of a saturated key now waits held, packed.
        if (plans.length < cmd.max && !this.packed.core.paused && this.keyLimit !== undefined) {
          const snapshot = new Map(this.packed.core.snapshot().map((e) => [e.id, e]));
          coverage.heldPacked += [...this.packedIds()].filter((id) => {
            const key = snapshot.get(id)!.concurrencyKey;
            return key !== "" && this.packed.core.inflightOfKey(key) >= this.keyLimit!;
          }).length;
        }
        return;
      }
      case "settle": {
        const live = [...this.leases.keys()].sort();
        if (cmd.stale || live.length === 0) {
          const leaseId = this.deadLeases[cmd.pick % Math.max(1, this.deadLeases.length)] ?? "never";
          const taskId = this.ids[cmd.pick % Math.max(1, this.ids.length)] ?? "none";
          this.both((c) => c.settle([{ leaseId, taskId, outcome: cmd.outcome }], this.nowMs));
          return;
        }
        const leaseId = live[cmd.pick % live.length]!;
        const taskIds = this.leases.get(leaseId)!;
        const taskId = taskIds[cmd.pick % taskIds.length]!;
        this.both((c) => c.settle([{ leaseId, taskId, outcome: cmd.outcome, result: new Uint8Array([1]), error: "e" }], this.nowMs));
        return;
      }
      case "advance": {
        this.nowMs += cmd.ms;
        const packedBefore = this.packedIds();
        this.both((c) => c.tick(this.nowMs));
        coverage.expiredPacked += [...packedBefore].filter((id) => !this.packed.core.has(id)).length;
        return;
      }
      case "heartbeat": {
        const all = [...this.leases.keys(), ...this.deadLeases];
        if (all.length > 0) this.both((c) => c.heartbeat([all[cmd.pick % all.length]!], this.nowMs));
        return;
      }
      case "keyLimit":
        this.keyLimit = cmd.limit;
        this.both((c) => c.setKeyLimit(cmd.limit, this.nowMs));
        return;
      case "operator": {
        if (this.ids.length === 0) return;
        const id = this.ids[cmd.pick % this.ids.length]!;
        const wasPacked = this.packedIds().has(id);
        const error = this.both((c) => {
          switch (cmd.action) {
            case "cancel": return c.cancel(id, "OPERATOR", this.nowMs);
            case "runNow": return c.runNow(id);
            case "archive": return c.archive(id, this.nowMs);
            case "delete": return c.delete(id);
          }
        });
        if (wasPacked && !error) coverage.unpackedByOperator += 1;
        return;
      }
      case "revive": {
        const candidates = [...this.revivable.keys()].sort();
        if (candidates.length === 0) return;
        const id = candidates[cmd.pick % candidates.length]!;
        const record = this.record(id);
        const error = this.both((c) => c.revive(record, this.nowMs));
        if (!error) coverage.revived += 1;
        return;
      }
      case "pause":
        this.both((c) => c.setPaused(cmd.paused, this.nowMs));
        return;
      case "groupConfig":
        this.groupMaxSize = cmd.maxSize;
        this.both((c) => c.setGroupConfig("", cmd.maxSize === undefined ? undefined : { maxSize: cmd.maxSize, maxDelayMs: 800, graceMs: 300 }, this.nowMs));
        return;
      case "passivate":
        coverage.passivations += 1;
        for (const side of [this.packed, this.reference]) side.reload(this.nowMs, this.keyLimit, this.groupMaxSize);
        this.both(() => undefined);
        return;
    }
  }

  /** Everything a caller can see of the two cores is the same. */
  check(): void {
    const [p, r] = [this.packed.core, this.reference.core];
    expect(p.snapshot()).toEqual(r.snapshot());
    expect(p.stats()).toEqual(r.stats());
    expect(p.nextWakeAtMs()).toEqual(r.nextWakeAtMs());
    for (const state of TASK_STATES) expect(p.idsInState(state)).toEqual(r.idsInState(state));
    for (const id of this.ids) {
      expect(p.stateOf(id)).toBe(r.stateOf(id));
      expect(p.payloadBytesOf(id)).toBe(r.payloadBytesOf(id));
    }
    for (const key of KEYS) expect(p.inflightOfKey(key)).toBe(r.inflightOfKey(key));
    expect(p.listGroups()).toEqual(r.listGroups());
    for (const types of [undefined, ["a"], ["b", "c"]]) {
      const caps: LeaseCaps = { batchTypes: new Set(["a"]), ...(types ? { types: new Set(types) } : {}) };
      expect(p.pruneAndHasDispatchable(this.nowMs, caps)).toBe(r.pruneAndHasDispatchable(this.nowMs, caps));
    }
    expect(p.drain()).toEqual(r.drain());
    coverage.packed += this.packedIds().size;
  }

  private task(it: ItemSpec): NewTask {
    const id = it.chosenId !== "" ? it.chosenId : `t${++this.taskNo}`;
    const rules: TaskRule[] = it.rule === "" ? [] : [{ ruleId: `${it.type}#0`, key: it.key || "k", maxRuns: 1, strategy: it.rule }];
    const t = newTask({
      id, idChosen: it.chosenId !== "", type: it.type, priority: it.priority, concurrencyKey: it.key,
      processAtMs: it.processInMs > 0 ? this.nowMs + it.processInMs : 0,
      expiresAtMs: it.expiresInMs > 0 ? this.nowMs + it.expiresInMs : 0,
      deadlineAtMs: it.deadlineInMs > 0 ? this.nowMs + it.deadlineInMs : 0,
      timeoutMs: it.timeoutMs, uniqueKey: it.uniqueKey, maxRetry: it.maxRetry, group: it.group, rules,
      ruleError: it.ruleError ? "rule failed" : "", payload: new Uint8Array(it.payloadBytes),
      backoffBaseMs: 100, backoffMaxMs: 1_000,
    });
    if (!this.tasks.has(id)) {
      this.tasks.set(id, t);
      this.ids.push(id);
    }
    return t;
  }

  /** The stored record of a finished task, as the shell reads it for a revival. */
  private record(id: string): TaskRecord {
    const { entry, task } = this.revivable.get(id)!;
    return {
      ...entry, queue: QUEUE, payload: task.payload, contentType: task.contentType, metadata: {}, createdAtMs: 0,
      retentionMs: task.retentionMs, lastError: "", lastFailedAtMs: 0, finishedAtMs: this.nowMs, result: new Uint8Array(),
      cancelReason: "", state: entry.state,
    };
  }

  private observe(effects: readonly Effect[]): void {
    for (const e of effects) {
      if (e.kind === "archive" || e.kind === "cancel") this.revivable.set(e.entry.id, { entry: { ...e.entry }, task: this.tasks.get(e.entry.id)! });
      else if (e.kind === "revive" || e.kind === "delete") this.revivable.delete(e.kind === "delete" ? e.id : e.entry.id);
      if (e.kind === "recordAttempt") {
        for (const [leaseId, ids] of this.leases) {
          if (!ids.includes(e.taskId)) continue;
          const left = ids.filter((id) => id !== e.taskId);
          if (left.length > 0) this.leases.set(leaseId, left);
          else {
            this.leases.delete(leaseId);
            this.deadLeases.push(leaseId);
          }
        }
      }
    }
  }

  /** Ids the packed core holds in columns now (its stats must not tell: they equal the reference's). */
  private packedIds(): Set<string> {
    return new Set(this.packed.core.packedTaskIds());
  }
}

describe("the packed index", () => {
  it("behaves exactly like entry objects on random command sequences", () => {
    for (const k of Object.keys(coverage) as (keyof typeof coverage)[]) coverage[k] = 0;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000_000 }), fc.option(fc.integer({ min: 1, max: 2 }), { nil: undefined }), fc.array(cmdArb, { minLength: 5, maxLength: 60 }), (seed, limit, cmds) => {
        const twins = new Twins(seed);
        for (const cmd of [{ kind: "keyLimit", limit } as const, ...cmds]) {
          twins.run(cmd);
          twins.check();
        }
      }),
      { seed: 20_261_201, numRuns: 200 },
    );
    for (const [what, n] of Object.entries(coverage)) expect(n, `coverage of ${what}`).toBeGreaterThanOrEqual(10);
  });
});
