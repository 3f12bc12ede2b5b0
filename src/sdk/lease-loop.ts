/**
 * One long-poll loop of a worker against one node: reserve free slots (slot-budget.ts),
 * one Lease call for the queues this loop polls, hand the answer on, repeat. One call in
 * flight per loop; it parks on the node until work exists, so pickup needs no polling.
 *
 * The main loop (the worker's configured node) waits for its node as long as it takes
 * (`waitForReady`) and keeps retrying whatever fails, as a worker always did. A loop on
 * another node (lease-loops.ts) fails fast instead, and when its node is unreachable or
 * says it does not hold the queues, gives them back to the main loop and ends.
 *
 * An answer marked `relocated` (a handoff of some of its queues began on the node) is
 * followed by the next call at once, never a back-off, however quick it came.
 *
 * Queues that join a loop while its call is parked (a queue moved to this node, or handed
 * back to the main loop) get a *top-up*: one more Lease on the same node for just those
 * queues, with a slot of its own, so they are polled now instead of at the parked call's
 * next turn (up to `leaseWaitMs` later). The parked call is not cancelled for it: the node
 * may be handing it deliveries as it ends. The loop's next call names every queue again.
 */
import { ConveyorError } from "../base/errors.js";
import { BATCH_MAX, RECONNECT_BACKOFF_INITIAL_MS } from "../base/limits.js";
import { LEASE_CALL_IN_FLIGHT_MARGIN_MS } from "../base/lease-timing.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { LeaseRequestSchema, LeaseResponse, WorkerService } from "../gen/conveyor/v1/worker_service_pb.js";
import type { UnaryClient } from "../rpc/service-definition.js";
import { jitter, retryPauseMs } from "./retry-pause.js";
import type { SlotBudget } from "./slot-budget.js";
import { messageOf, secondsSince, type WorkerLogger } from "./worker-log.js";

/** Why a loop on another node gives its queues back: the node cannot serve them for us. */
const HAND_BACK_REASONS = new Set(["UNREACHABLE", "WRONG_OWNER", "OWNER_DOWN", "NO_ACTIVE_MEMBER"]);

/** What every Lease call of the worker says besides its queues and size. */
/** A queue a worker leases from, and its weight (LeaseRequest.queues). */
export interface LeaseQueue {
  queue: string;
  weight: number;
}

export interface LeaseBase {
  workerId: string;
  batchTypes: string[];
  types: string[];
  host: string;
  concurrency: number;
}

export interface LeaseLoopDeps {
  base: LeaseBase;
  /**
   * Whether to ask for a standing call now: on a session the node answers each lease of
   * deliveries and the call goes on, while this loop grants it every slot that frees (see
   * `lease`). Only while this is the worker's one loop: credits granted to one node's
   * standing call stay there until it ends, where several nodes share the slots.
   */
  standing(): boolean;
  leaseWaitMs: number;
  slots: SlotBudget;
  /** Ends every wait and call of the loop (the worker stops). */
  signal: AbortSignal;
  log: WorkerLogger;
  report(error: unknown, context: string): void;
  pause(ms: number): Promise<void>;
  /** The queues this loop polls now (they change between calls). */
  queues(): LeaseQueue[];
  /** How many of `free` slots this loop asks for. */
  share(loop: LeaseLoop, free: number): number;
  /** Whether to ask for an answer at once when some queues are held elsewhere (`poll_owners`). */
  pollOwners(): boolean;
  /** Handles an answer: runs its deliveries, follows its routes. */
  answered(loop: LeaseLoop, res: LeaseResponse): void;
  /** This loop (not the main one) cannot serve its queues: give them back. */
  handBack(loop: LeaseLoop, error: unknown): void;
}

export class LeaseLoop {
  /** Whether a Lease call is out now. */
  parked = false;
  lastAnswerEmpty = false;
  /** Whether any Lease call was made (a node never called has nothing to fence on stop). */
  everLeased = false;
  /** Set the moment `run` returns (a loop that ended takes no more queues). */
  ended = false;
  private wakeIdle: (() => void) | undefined;
  /** The queues the parked call names (undefined while no call is out). */
  private calling: ReadonlySet<string> | undefined;
  private toppingUp = false;

  constructor(
    readonly address: string,
    private readonly rpc: UnaryClient<typeof WorkerService>,
    readonly main: boolean,
    private readonly deps: LeaseLoopDeps,
  ) {}

  /** Main loop with no queues (all moved to their owners): wakes it when some come back. */
  wake(): void {
    this.wakeIdle?.();
  }

  /**
   * Queues may have joined this loop: if its call is parked without some of them, poll
   * those now with a top-up call (see the header). One top-up at a time; when it ends
   * while the call is still parked, the queues it polled get the next one.
   */
  joined(): void {
    if (this.calling === undefined || this.toppingUp || this.ended || this.deps.signal.aborted) return;
    if (this.missing().length === 0) return;
    this.toppingUp = true;
    void this.topUp().finally(() => {
      this.toppingUp = false;
      this.joined();
    });
  }

  /** Runs until the worker stops; a loop on another node also ends once it has no queues. */
  async run(): Promise<void> {
    try {
      await this.poll();
    } finally {
      this.ended = true;
    }
  }

  private async poll(): Promise<void> {
    const { signal } = this.deps;
    let failures = 0;
    let lostAt = 0;
    while (!signal.aborted) {
      if (this.deps.queues().length === 0) {
        if (!this.main) return;
        await new Promise<void>((resolve) => {
          const done = () => {
            signal.removeEventListener("abort", done);
            resolve();
          };
          this.wakeIdle = done;
          signal.addEventListener("abort", done, { once: true });
        });
        this.wakeIdle = undefined;
        continue;
      }
      const slots = await this.deps.slots.reserve((free) => Math.min(BATCH_MAX, this.deps.share(this, free)), signal);
      if (slots === 0) break;
      // The reservation may have waited: a stop that came meanwhile must not start a long poll.
      if (signal.aborted) {
        this.deps.slots.release(slots);
        break;
      }
      let answer: { res: LeaseResponse; quick: boolean; reserved: number };
      const call = { reserved: slots };
      try {
        answer = await this.lease(call);
      } catch (error) {
        this.deps.slots.release(call.reserved);
        if (signal.aborted) break;
        if (!this.main && error instanceof ConveyorError && HAND_BACK_REASONS.has(error.reason)) {
          this.deps.handBack(this, error);
          return;
        }
        this.deps.report(error, "lease");
        if (failures === 0) {
          lostAt = Date.now();
          const lost = error instanceof ConveyorError && error.reason === "UNREACHABLE";
          this.deps.log.warn(lost ? `lost the node at ${this.address} (${messageOf(error)}); retrying` : `lease failed: ${messageOf(error)}; retrying`);
        }
        failures += 1;
        // The main loop's next Lease waits for the connection (waitForReady); this pause
        // only keeps a node that refuses every call from being called in a tight loop.
        await this.deps.pause(retryPauseMs(failures));
        continue;
      }
      if (failures > 0) this.deps.log.info(`reconnected to the node at ${this.address} after ${secondsSince(lostAt)} s`);
      failures = 0;
      // Deliveries take their slots (as running) before the reservation is given back.
      this.deps.answered(this, answer.res);
      this.deps.slots.release(answer.reserved);
      if (answer.res.deliveries.length > 0) {
        // Let handlers that finish at once free their slots first, so the next Lease
        // asks for every free slot (fewer, fuller round trips).
        await new Promise((resolve) => setImmediate(resolve));
      } else if (answer.res.relocated) {
        // Some queues' partition started moving off this node: call again at once. The node
        // holds the call until the move ends (bounded by its cluster_handoff_wait), then
        // answers with their new owner in `routes`, and that owner's loop polls at once.
        this.deps.log.info(`a partition of queues ${this.deps.queues().map((q) => q.queue).join(", ")} is moving off the node at ${this.address}; polling again for its new owner`);
      } else if (answer.quick && answer.res.routes.length === 0) {
        // An empty answer at once means no wait was possible (a zero leaseWaitMs, or the
        // server still fences a previous run of this worker id): back off, do not spin.
        // (An answer carrying routes came at once on purpose: the queues move now.)
        await this.deps.pause(jitter(RECONNECT_BACKOFF_INITIAL_MS));
      }
    }
  }

  /** The loop's queues the parked call does not name. */
  private missing(): LeaseQueue[] {
    const calling = this.calling;
    return calling === undefined ? [] : this.deps.queues().filter((q) => !calling.has(q.queue));
  }

  private async topUp(): Promise<void> {
    const { signal, slots } = this.deps;
    const reserved = await slots.reserve(() => 1, signal);
    if (reserved === 0) return;
    try {
      // Re-read after the reservation (it may have waited): the parked call may be over.
      const queues = this.missing();
      if (queues.length === 0 || signal.aborted) return;
      const res = await this.rpc.lease({
        ...this.deps.base, queues, maxDeliveries: reserved, waitMs: this.deps.leaseWaitMs, pollOwners: this.deps.pollOwners(),
      }, { timeoutMs: this.deps.leaseWaitMs + LEASE_CALL_IN_FLIGHT_MARGIN_MS, signal, waitForReady: this.main });
      // Deliveries take their slots (as running) before the reservation is given back.
      this.deps.answered(this, res);
    } catch (error) {
      // The loop's own call meets the same node and handles what is wrong with it.
      if (!signal.aborted) this.deps.report(error, "lease");
    } finally {
      slots.release(reserved);
    }
  }

  /**
   * One Lease call for `call.reserved` slots. A standing call (on a session) is answered
   * each time the node leases deliveries, and goes on: each answer's deliveries run at
   * once, and while it goes on, every slot that frees is reserved and granted to it as a
   * credit, so the node fills it the moment it has work, with no Lease round trip
   * between two tasks of a slot. `call.reserved` is what the call holds reserved and not
   * yet filled: the caller gives it back when the call ends, answered or failed.
   */
  private async lease(call: { reserved: number }): Promise<{ res: LeaseResponse; quick: boolean; reserved: number }> {
    const calledAt = Date.now();
    this.everLeased = true;
    this.parked = true;
    const ended = new AbortController();
    const { slots, signal } = this.deps;
    const stop = () => ended.abort();
    signal.addEventListener("abort", stop, { once: true });
    try {
      const queues = this.deps.queues();
      this.calling = new Set(queues.map((q) => q.queue));
      const standing = this.deps.standing();
      const request: MessageInitShape<typeof LeaseRequestSchema> = {
        ...this.deps.base, queues, maxDeliveries: call.reserved, waitMs: this.deps.leaseWaitMs, pollOwners: this.deps.pollOwners(), standing,
      };
      const res = await this.rpc.lease(request, {
        timeoutMs: this.deps.leaseWaitMs + LEASE_CALL_IN_FLIGHT_MARGIN_MS, signal,
        // Only the main loop waits for its node: another node that cannot be reached gives its queues back at once.
        waitForReady: this.main,
        ...(standing ? {
          standing: {
            attached: (grant: (credits: number) => void) => void this.grantFreedSlots(call, grant, ended.signal),
            answered: (more: unknown) => {
              const r = more as LeaseResponse;
              this.lastAnswerEmpty = false;
              // Deliveries take their slots (as running) before the reservation is given back.
              this.deps.answered(this, r);
              const filled = Math.min(call.reserved, r.deliveries.length);
              call.reserved -= filled;
              slots.release(filled);
            },
          },
        } : {}),
      });
      this.lastAnswerEmpty = res.deliveries.length === 0;
      return { res, quick: Date.now() - calledAt < 50, reserved: call.reserved };
    } finally {
      stop();
      signal.removeEventListener("abort", stop);
      this.parked = false;
      this.calling = undefined;
    }
  }

  /**
   * While a standing call goes on: each time slots free (handlers that end in one turn
   * count together), reserve them and grant them to the call as credits.
   */
  private async grantFreedSlots(call: { reserved: number }, grant: (credits: number) => void, ended: AbortSignal): Promise<void> {
    const { slots } = this.deps;
    // Stops granting once the worker polls other nodes too (see LeaseLoopDeps.standing).
    while (!ended.aborted && this.deps.standing()) {
      let more = await slots.reserve((free) => Math.min(BATCH_MAX, this.deps.share(this, free)), ended);
      if (more === 0) return;
      // One turn later: the settlements of the handlers that freed these slots go first
      // (their outbox flushes in the turn they ended), so a task they make ready (a key's
      // next) meets the credit at the node; slots freed meanwhile go in the same grant.
      await new Promise((resolve) => setImmediate(resolve));
      more += slots.tryReserve(BATCH_MAX - more);
      if (ended.aborted) {
        slots.release(more);
        return;
      }
      call.reserved += more;
      grant(more);
    }
  }
}
