/**
 * Shared builders for the pure queue core's unit and property tests: a complete NewTask
 * builder, a hand-advanced fake time, a core factory with seeded randomness and counted
 * lease ids, and small helpers to read effects and rebuild a core from its snapshot.
 */
import type { CoreConfig } from "../../src/grains/queue/queue-core.js";
import { expect } from "vitest";
import { ConveyorError, type ErrorCode, type ErrorReason } from "../../src/base/errors.js";
import { seededRandom, type Random } from "../../src/base/random.js";
import type { Effect, TaskTransition } from "../../src/grains/queue/effects.js";
import {
  QueueCore,
  type DeliveryPlan,
  type EnqueueOutcome,
  type KnownIds,
  type Settlement,
} from "../../src/grains/queue/queue-core.js";
import type { NewTask, TaskIndexEntry, TaskState } from "../../src/grains/queue/task.js";

export const QUEUE = "q";
export const LEASE_TTL_MS = 1_000;
export const NO_KNOWN: KnownIds = new Map();

let taskCounter = 0;

/** A complete, valid NewTask: pending at once, priority 4, 3 retries, no timers, no key. */
export function newTask(overrides: Partial<NewTask> = {}): NewTask {
  taskCounter += 1;
  return {
    id: `task-${taskCounter}`,
    idChosen: false,
    queue: QUEUE,
    type: "email:send",
    payload: new Uint8Array([1, 2, 3]),
    contentType: "application/octet-stream",
    metadata: {},
    priority: 4,
    maxRetry: 3,
    timeoutMs: 0,
    deadlineAtMs: 0,
    processAtMs: 0,
    uniqueKey: "",
    uniqueTtlMs: 0,
    retentionMs: 86_400_000,
    expiresAtMs: 0,
    concurrencyKey: "",
    group: "",
    backoffBaseMs: 1_000,
    backoffMaxMs: 60_000,
    rules: [],
    ruleError: "",
    ...overrides,
  };
}

/** A time value advanced by hand. */
export class FakeTime {
  constructor(public nowMs = 1_000_000) {}

  advance(ms: number): number {
    this.nowMs += ms;
    return this.nowMs;
  }

  set(ms: number): number {
    this.nowMs = ms;
    return this.nowMs;
  }
}

/** Lease ids "L1", "L2", ... (a shared counter keeps ids unique across rebuilt cores). */
export function leaseIdCounter(prefix = "L"): () => string {
  let n = 0;
  return () => `${prefix}${++n}`;
}

export interface CoreHarness {
  core: QueueCore;
  time: FakeTime;
  random: Random;
  newId: () => string;
}

export interface CoreOptions {
  leaseTtlMs?: number;
  seed?: number;
  startMs?: number;
  random?: Random;
  newId?: () => string;
}

/** Core settings for tests: the seed's group defaults. */
export function coreConfig(leaseTtlMs: number = LEASE_TTL_MS): CoreConfig {
  return { leaseTtlMs, groupDefaults: { maxSize: 100, maxDelayMs: 60_000, graceMs: 10_000 } };
}

export function makeCore(options: CoreOptions = {}): CoreHarness {
  const random = options.random ?? seededRandom(options.seed ?? 42);
  const newId = options.newId ?? leaseIdCounter();
  const core = new QueueCore(QUEUE, coreConfig(options.leaseTtlMs ?? LEASE_TTL_MS), { random, newId });
  return { core, time: new FakeTime(options.startMs), random, newId };
}

/**
 * A fresh core loaded from `from`'s snapshot and settings, as passivation plus
 * activation would do (the shell loads the same rows from storage).
 */
export function reload(from: QueueCore, nowMs: number, options: CoreOptions = {}): QueueCore {
  const { core } = makeCore(options);
  core.load(from.snapshot(), { paused: from.paused, ...(from.keyLimit !== undefined ? { keyLimit: from.keyLimit } : {}) }, nowMs);
  return core;
}

/** Enqueues and asserts every item was admitted (not merely found). */
export function enqueueAll(core: QueueCore, tasks: readonly NewTask[], nowMs: number, known: KnownIds = NO_KNOWN): string[] {
  const outcomes = core.enqueue(tasks, known, nowMs, false);
  for (const o of outcomes) {
    if (!o.ok) throw o.error;
    expect(o.existed).toBe(false);
  }
  return outcomes.map((o) => (o as Extract<EnqueueOutcome, { ok: true }>).id);
}

/** Task ids of a lease answer, in dispatch order (each delivery holds one task). */
export const leasedIds = (plans: readonly DeliveryPlan[]): string[] => plans.flatMap((p) => p.taskIds);

/** Leases exactly one delivery and returns it. */
export function leaseOne(core: QueueCore, nowMs: number): DeliveryPlan {
  const plans = core.lease(1, nowMs);
  expect(plans).toHaveLength(1);
  return plans[0]!;
}

/** Settles one task of a delivery and asserts the core accepted it. */
export function settleOk(core: QueueCore, plan: DeliveryPlan, nowMs: number, extra: Partial<Settlement> = {}): void {
  const [error] = core.settle([{ leaseId: plan.leaseId, taskId: plan.taskIds[0]!, outcome: "success", ...extra }], nowMs);
  expect(error).toBeNull();
}

export function entryOf(core: QueueCore, id: string): TaskIndexEntry | undefined {
  return core.snapshot().find((e) => e.id === id);
}

/** A named transition that changes a stored task's state (not an insert or a delete). */
export type TransitionEffect = Exclude<TaskTransition, { kind: "insert" | "delete" }>;

/** The state each named transition leaves its task in. */
const STATE_OF: Record<TransitionEffect["kind"], TaskState> = {
  activate: "active", complete: "completed", retry: "retry", requeue: "pending", release: "pending",
  promote: "pending", fireGroup: "pending", revive: "pending", archive: "archived", cancel: "cancelled",
};

/** Every outcome field any transition may carry. */
export interface TransitionOutcome {
  lastError?: string;
  lastFailedAtMs?: number;
  finishedAtMs?: number;
  result?: Uint8Array;
  cancelReason?: string;
}

/**
 * True for a state transition, asserting that its name matches the state it leaves the
 * task in (the store runs the statement the name says).
 */
export function isStateTransition(e: Effect): e is TransitionEffect {
  if (!(e.kind in STATE_OF)) return false;
  const t = e as TransitionEffect;
  expect(t.entry.state, `the ${t.kind} transition of ${t.entry.id}`).toBe(STATE_OF[t.kind]);
  return true;
}

export const outcomeOf = (t: TransitionEffect): TransitionOutcome | undefined => ("outcome" in t ? t.outcome : undefined);

export const transitions = (effects: readonly Effect[]): TransitionEffect[] => effects.filter(isStateTransition);

export const inserts = (effects: readonly Effect[]) =>
  effects.filter((e): e is Extract<Effect, { kind: "insert" }> => e.kind === "insert");

/** The last transition of `id` in `effects`, asserting there is one. */
export function lastTransition(effects: readonly Effect[], id: string): { state: TaskState; entry: TaskIndexEntry; outcome?: TransitionOutcome } {
  const mine = transitions(effects).filter((t) => t.entry.id === id);
  expect(mine.length, `a transition effect for ${id}`).toBeGreaterThan(0);
  const last = mine[mine.length - 1]!;
  const outcome = outcomeOf(last);
  return { state: last.entry.state, entry: last.entry, ...(outcome ? { outcome } : {}) };
}

export function expectConveyorError(error: unknown, code: ErrorCode, reason: ErrorReason): void {
  expect(error).toBeInstanceOf(ConveyorError);
  const e = error as ConveyorError;
  expect({ code: e.code, reason: e.reason }).toEqual({ code, reason });
}
