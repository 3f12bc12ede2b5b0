/** WorkerService: long-poll Lease, Heartbeat and Settle, translated to grain calls. */
import { toItemError } from "../rpc/status.js";
import { LEASE_CALL_IN_FLIGHT_MARGIN_MS } from "../base/lease-timing.js";
import { asStorageFailure, ConveyorError, invalidField } from "../base/errors.js";
import type { AttemptOutcome } from "../grains/queue/attempts.js";
import { settledAttempt } from "../grains/queue/lease-lifecycle.js";
import type { Settlement } from "../grains/queue/queue-core.js";
import type { LeasedDelivery } from "../grains/queue/queue-grain.js";
import type { Outcome } from "../grains/queue/task.js";
import { Outcome as WireOutcome, WorkerService } from "../gen/conveyor/v1/worker_service_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import { deliveryToWire } from "./convert.js";
import { ruleFromWire } from "./rules/rule-wire.js";
import type { Router } from "../cluster/router.js";
import type { LeaseBroker, LeaseCall } from "../grains/runtime/lease-broker.js";
import type { WorkerRegistry } from "../grains/runtime/worker-registry.js";
import type { NodeConfig } from "./config.js";
import type { RuleRegistry } from "./rules/rule-registry.js";
import type { RuleWriter } from "./rules/rule-writer.js";
import { WorkSlicer, chunksBy } from "./work-slicer.js";
import { BATCH_MAX, checkLength, checkQueueName } from "./validate.js";
import {
  ATTEMPT_STACK_MAX_BYTES, ERROR_MESSAGE_MAX_BYTES, HEARTBEAT_LEASES_MAX, KEY_MAX_CHARS, LEASE_BATCH_TYPES_MAX, LEASE_TYPES_MAX, LEASE_ID_MAX_CHARS, LEASE_QUEUES_MAX,
  REGISTER_RULES_MAX, REGISTER_TYPES_MAX, RESULT_MAX_BYTES, SETTLEMENTS_MAX, TASK_ID_MAX_CHARS, WORK_SLICE_BYTES,
  WORKER_HOST_MAX_CHARS, WORKER_ID_MAX_CHARS, truncateBytes, truncateText,
} from "../base/limits.js";

const OUTCOMES: Partial<Record<WireOutcome, Outcome>> = {
  [WireOutcome.SUCCESS]: "success",
  [WireOutcome.RETRY]: "retry",
  [WireOutcome.SKIP_RETRY]: "skip_retry",
  [WireOutcome.RELEASED]: "released",
};

/** Groups items by queue, keeping each item's position. */
function byQueue<T extends { queue: string }>(items: readonly T[]): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const list = groups.get(item.queue) ?? [];
    list.push(i);
    groups.set(item.queue, list);
  });
  return groups;
}

/** What a call on a session adds for a standing Lease (session-server.ts). */
interface Standing {
  answerMore(response: object): void;
  onCredits(listener: (credits: number) => void): void;
}

/** The standing side of a call, when it came on a session (a unary call has none). */
function standingOf(call: object): Standing | undefined {
  const c = call as { answerMore?: (response: object) => void; on?: (event: string, listener: (credits: number) => void) => void };
  if (typeof c.answerMore !== "function" || typeof c.on !== "function") return undefined;
  return { answerMore: c.answerMore, onCredits: (listener) => c.on!("credits", listener) };
}

/** Settlements per grain turn (a few milliseconds of work). */
const SETTLE_CHUNK = 100;

/** Refuses a list longer than its bound, naming the field and the maximum. */
function checkCount(n: number, max: number, field: string, what: string): void {
  if (n > max) throw invalidField(field, `at most ${max} ${what}, got ${n}`);
}

/** What WorkerService uses, and nothing else. */
export interface WorkerServiceDeps {
  router: Pick<Router, "grainFor" | "checkHeld">;
  broker: Pick<LeaseBroker, "lease" | "drain" | "undrain">;
  /** Who calls: every call says its worker is still there; heartbeats and settles end leases. */
  workers: Pick<WorkerRegistry, "seen" | "registered" | "heartbeat" | "settled">;
  /** Task types' rules, which workers register: compiled here, written through `ruleWriter` (this node's, or the cluster's). */
  rules: Pick<RuleRegistry, "prepare">;
  ruleWriter: Pick<RuleWriter, "registerAll">;
  config: Pick<NodeConfig, "leaseWaitMaxMs" | "leaseTtlMs" | "heartbeatIntervalMs">;
  /** Resolves once every write so far is durable (the rule registry's writes). */
  committed: () => Promise<void>;
  /** How the stored attempt of a task that ended under a lease ended, if one did (a settle sent again). */
  attemptEndedUnder: (taskId: string, leaseId: string) => AttemptOutcome | undefined;
}

export function workerService(ctx: WorkerServiceDeps): UnaryImpl<typeof WorkerService> {
  /**
   * A settle the grain refused because its lease no longer holds the task, although that
   * very lease ended the task's attempt with this outcome: the same settle sent again (its
   * first answer was lost, e.g. while the queue moved to another node), answered OK as
   * the first was. Read after the refusing turn, whose commit follows the first settle's.
   */
  const alreadyApplied = (e: Error, s: Settlement) =>
    e instanceof ConveyorError && e.reason === "LEASE_NOT_HELD" && ctx.attemptEndedUnder(s.taskId, s.leaseId) === settledAttempt(s).outcome;

  /** Deliveries whose caller went away go straight back to pending, no retry spent. */
  async function releaseOrphans(deliveries: readonly LeasedDelivery[]): Promise<void> {
    for (const d of deliveries) for (const taskId of d.taskIds) ctx.workers.settled(d.leaseId, taskId);
    const refs = deliveries.map((d) => ctx.router.grainFor(d.queue));
    await Promise.all(deliveries.map((d, i) =>
      refs[i]!.settle(d.taskIds.map((taskId) => ({ leaseId: d.leaseId, taskId, outcome: "released" as const })))));
  }

  /**
   * A standing Lease (LeaseRequest.standing, on a session): answers with each lease of
   * deliveries and goes on while the worker grants credits, so a slot freed by a finished
   * task is filled in the very turn that frees its task's successor, with no Lease round
   * trip between. `leaseCall.max` is what the worker has granted and not yet received:
   * the broker reads it when it serves the call, so credits that come while it is parked
   * count at once. Ends with an empty answer (as an ordinary Lease's end of wait) after
   * wait_ms without a delivery, on a relocation or a drain; cancelled, it releases
   * deliveries its caller will never see.
   */
  async function stand(leaseCall: LeaseCall, standing: Standing, signal: AbortSignal, cancelled: () => boolean,
    answer: (deliveries: readonly LeasedDelivery[]) => object): Promise<object> {
    let wake: (() => void) | undefined;
    standing.onCredits((credits) => {
      leaseCall.max = Math.min(BATCH_MAX, leaseCall.max + credits);
      wake?.();
    });
    signal.addEventListener("abort", () => wake?.(), { once: true });
    // The wait bound counts from the last answer (the caller's deadline starts again with each).
    const waitMs = leaseCall.waitMs;
    let answeredAt = performance.now();
    const waitLeft = () => Math.max(0, waitMs - (performance.now() - answeredAt));
    for (;;) {
      if (leaseCall.max <= 0) {
        // Every slot granted is filled: wait for credits (the worker frees slots), within the wait bound.
        const timedOut = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(true), waitLeft());
          wake = () => {
            clearTimeout(timer);
            resolve(false);
          };
        });
        wake = undefined;
        if (cancelled()) return {};
        if (timedOut) return answer([]);
      }
      leaseCall.waitMs = waitLeft();
      const deliveries = await ctx.broker.lease(leaseCall);
      if (cancelled()) {
        if (deliveries.length > 0) await releaseOrphans(deliveries);
        return {};
      }
      // Nothing within the wait, a relocation or a drain: the call ends as an ordinary Lease does.
      if (deliveries.length === 0) return answer([]);
      leaseCall.max -= deliveries.length;
      standing.answerMore(answer(deliveries));
      answeredAt = performance.now();
    }
  }

  return {
    async lease(call) {
      const req = call.request;
      checkLength(req.workerId, "worker_id", WORKER_ID_MAX_CHARS);
      checkLength(req.host, "host", WORKER_HOST_MAX_CHARS);
      req.batchTypes.forEach((t, i) => checkLength(t, `batch_types[${i}]`, KEY_MAX_CHARS));
      if (req.queues.length === 0) throw invalidField("queues", "name at least one queue");
      checkCount(req.queues.length, LEASE_QUEUES_MAX, "queues", "queues per Lease call");
      checkCount(req.batchTypes.length, LEASE_BATCH_TYPES_MAX, "batch_types", "batch types per Lease call");
      checkCount(req.types.length, LEASE_TYPES_MAX, "types", "task types per Lease call");
      req.types.forEach((t, i) => checkLength(t, `types[${i}]`, KEY_MAX_CHARS));
      const queues = req.queues.map((q, i) => ({ name: checkQueueName(q.queue, `queues[${i}].queue`), weight: q.weight || 1 }));
      if (req.maxDeliveries < 1 || req.maxDeliveries > BATCH_MAX) {
        throw invalidField("max_deliveries", `must be 1..${BATCH_MAX}, got ${req.maxDeliveries}`);
      }
      // Every queue is held here, or the call is refused before anything is leased: the
      // broker leases queue by queue, and a queue refused WRONG_OWNER after others were
      // leased would leave their tasks leased to nobody until the lease lapsed (a forwarded
      // Lease whose sender had not seen a move yet; found by the 3 → 4 scale-out test).
      for (const q of queues) ctx.router.checkHeld(q.name);
      const abort = new AbortController();
      call.on("cancelled", () => abort.abort());
      let relocated = false;
      const leaseCall: LeaseCall = {
        workerId: req.workerId, host: req.host, concurrency: req.concurrency, queues, caps: { batchTypes: new Set(req.batchTypes), ...(req.types.length > 0 ? { types: new Set(req.types) } : {}) }, max: req.maxDeliveries, waitMs: Math.min(req.waitMs, ctx.config.leaseWaitMaxMs), signal: abort.signal,
        onRelocated: () => (relocated = true),
      };
      const answer = (deliveries: readonly LeasedDelivery[]) => ({
        deliveries: deliveries.map(deliveryToWire),
        leaseTtlMs: ctx.config.leaseTtlMs,
        heartbeatIntervalMs: Math.max(50, Math.min(ctx.config.heartbeatIntervalMs, Math.floor(ctx.config.leaseTtlMs / 3))),
        relocated,
      });
      const standing = standingOf(call);
      if (req.standing && standing) return stand(leaseCall, standing, abort.signal, () => call.cancelled, answer);
      const deliveries = await ctx.broker.lease(leaseCall);
      if (call.cancelled && deliveries.length > 0) {
        await releaseOrphans(deliveries);
        return {};
      }
      return answer(deliveries);
    },

    async heartbeat(call) {
      const leases = call.request.leases;
      checkLength(call.request.workerId, "worker_id", WORKER_ID_MAX_CHARS);
      checkCount(leases.length, HEARTBEAT_LEASES_MAX, "leases", "leases per Heartbeat call");
      checkCount(new Set(leases.map((l) => l.queue)).size, LEASE_QUEUES_MAX, "leases", "distinct queues per Heartbeat call");
      leases.forEach((l, i) => {
        checkQueueName(l.queue, `leases[${i}].queue`);
        checkLength(l.leaseId, `leases[${i}].lease_id`, LEASE_ID_MAX_CHARS);
      });
      ctx.workers.seen(call.request.workerId);
      const statuses = new Array(leases.length);
      // Routed first (a queue owned elsewhere fails the call before any turn runs); then
      // one grain turn per queue (activating a grain costs a query), yielding between
      // slices of work. A heartbeat can end an attempt whose timeout passed (a write):
      // each ref resolves after its commit, and a failed commit fails the call.
      const groups = [...byQueue(leases)].map(([queue, indexes]) => ({ queue, indexes, ref: ctx.router.grainFor(queue) }));
      const slicer = new WorkSlicer();
      const turns: Promise<void>[] = [];
      for (const { queue, indexes, ref } of groups) {
        const turn = ref.heartbeat(indexes.map((i) => leases[i]!.leaseId)).then((views) => {
          views.forEach((v, k) => {
            ctx.workers.heartbeat(v.leaseId, v.held, v.leaseExpiresAtMs);
            statuses[indexes[k]!] = {
              queue, leaseId: v.leaseId, held: v.held, cancelRequested: v.cancelRequested,
              cancelReason: v.cancelReason, leaseExpiresAtMs: BigInt(v.leaseExpiresAtMs),
            };
          });
        }, (error: unknown) => {
          throw asStorageFailure(error);
        });
        // Handled now, awaited below: no rejection goes unhandled while the loop yields.
        turn.catch(() => {});
        turns.push(turn);
        if (slicer.due()) await slicer.yield();
      }
      await Promise.all(turns);
      return { leases: statuses };
    },

    async settle(call) {
      const items = call.request.settlements;
      checkCount(items.length, SETTLEMENTS_MAX, "settlements", "settlements per Settle call");
      checkCount(new Set(items.map((s) => s.queue)).size, LEASE_QUEUES_MAX, "settlements", "distinct queues per Settle call");
      checkLength(call.request.workerId, "worker_id", WORKER_ID_MAX_CHARS);
      // Validate everything first: a bad item must not leave the call half applied.
      const settlements: Settlement[] = items.map((s, i) => {
        checkQueueName(s.queue, `settlements[${i}].queue`);
        checkLength(s.leaseId, `settlements[${i}].lease_id`, LEASE_ID_MAX_CHARS);
        checkLength(s.taskId, `settlements[${i}].task_id`, TASK_ID_MAX_CHARS);
        const outcome = OUTCOMES[s.outcome];
        if (!outcome) throw invalidField(`settlements[${i}].outcome`, "must be SUCCESS, RETRY, SKIP_RETRY or RELEASED");
        // A result or error over its limit is kept truncated (with a marker): the
        // attempt's outcome matters more than its tail, and the task still settles.
        return {
          leaseId: s.leaseId, taskId: s.taskId, outcome,
          result: truncateBytes(s.result, RESULT_MAX_BYTES), error: truncateText(s.error, ERROR_MESSAGE_MAX_BYTES),
          ...(s.stack ? { stack: truncateText(s.stack, ATTEMPT_STACK_MAX_BYTES) } : {}),
        };
      });
      ctx.workers.seen(call.request.workerId);
      for (const s of settlements) ctx.workers.settled(s.leaseId, s.taskId);
      // Refuse the draining worker for longer than any of its Lease calls can be in flight.
      if (call.request.workerDraining) ctx.broker.drain(call.request.workerId, ctx.config.leaseWaitMaxMs + LEASE_CALL_IN_FLIGHT_MARGIN_MS);
      const results = new Array(items.length);
      // Items are independent: applied SETTLE_CHUNK per grain turn (and at most a slice of
      // row bytes: settling rewrites each task's row, payload and result included),
      // yielding between slices of work. Each turn's promise resolves after its commit;
      // a chunk whose commit failed gives exactly its items an item error.
      const slicer = new WorkSlicer();
      const turns: Promise<void>[] = [];
      const groups = [...byQueue(items)].map(([queue, indexes]) => ({ indexes, ref: ctx.router.grainFor(queue) }));
      for (const { indexes, ref } of groups) {
        const payloads = await ref.payloadBytesOf(indexes.map((i) => settlements[i]!.taskId));
        const rowBytes = new Map(indexes.map((i, k) => [i, payloads[k]! + (settlements[i]!.result?.byteLength ?? 0) + (settlements[i]!.error?.length ?? 0)]));
        for (const part of chunksBy(indexes, SETTLE_CHUNK, WORK_SLICE_BYTES, (i) => rowBytes.get(i)!)) {
          const turn = ref.settle(part.map((i) => settlements[i]!)).then((errors) => {
            errors.forEach((e, k) => {
              const i = part[k]!;
              const error = e && !alreadyApplied(e, settlements[i]!) ? e : null;
              results[i] = { taskId: items[i]!.taskId, ...(error ? { error: toItemError(error) } : {}) };
            });
          }, (error: unknown) => {
            const e = toItemError(asStorageFailure(error));
            for (const i of part) results[i] = { taskId: items[i]!.taskId, error: e };
          });
          turns.push(turn);
          slicer.wrote(part.reduce((n, i) => n + rowBytes.get(i)!, 0));
          if (slicer.due()) await slicer.yield();
        }
      }
      await Promise.all(turns);
      return { results };
    },

    async registerTaskTypes(call) {
      const types = call.request.types;
      checkLength(call.request.workerId, "worker_id", WORKER_ID_MAX_CHARS);
      checkCount(types.length, REGISTER_TYPES_MAX, "types", "task types per RegisterTaskTypes call");
      const ruleCount = types.reduce((n, t) => n + t.concurrency.length, 0);
      checkCount(ruleCount, REGISTER_RULES_MAX, "types", "concurrency rules per RegisterTaskTypes call (over all types)");
      // Validate every type first: a bad registration changes nothing.
      types.forEach((t, i) => {
        checkLength(t.type, `types[${i}].type`, KEY_MAX_CHARS);
        if (t.type === "") throw invalidField(`types[${i}].type`, "must not be empty");
      });
      const staged = types.map((t) => ({ type: t.type, rules: t.concurrency.map(ruleFromWire) }));
      await ctx.rules.prepare(staged.flatMap((t) => t.rules));
      await ctx.ruleWriter.registerAll(staged.map((t, i) => ({ ...t, field: `types[${i}].concurrency` })));
      // A worker registers when it starts: a restarted worker with a fixed id is not draining.
      ctx.broker.undrain(call.request.workerId);
      ctx.workers.registered(call.request.workerId, types.map((t) => t.type));
      await ctx.committed();
      return {};
    },
  };
}
