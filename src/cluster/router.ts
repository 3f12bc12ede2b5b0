/**
 * Routes every queue call to the grain of a queue this node holds. Services never reach a
 * grain any other way: they get a `QueueRef` (Promise-returning, resolves after the
 * owner's commit). Calls for queues held elsewhere never get here: the forwarding layer
 * in front of the services (forwarding/forwarder.ts) sends them to their owner. The
 * router still checks, synchronously, that this node holds the queue's partition now and
 * may acknowledge writes (not fenced): a claim lost between the forwarder's decision and
 * the grain turn fails the call with WRONG_OWNER instead of serving it.
 */
import { fenced, queueLabel, taskNotFound, wrongOwner } from "../base/errors.js";
import type { QueueGrain } from "../grains/queue/queue-grain.js";
import type { QueueRef } from "../grains/runtime/queue-ref.js";
import type { Ownership } from "./ownership.js";

export interface RouterDeps {
  ownership: Ownership;
  /** A ref on a queue this node owns. */
  localRef: (queue: string) => QueueRef;
  /** The local grain itself, for the lease broker's synchronous long-poll path. */
  localGrain: (queue: string) => QueueGrain;
  /** Which queue a task id lives in (the task directory). */
  queueOfTask: (id: string) => string | undefined;
}

export class Router {
  constructor(private readonly deps: RouterDeps) {}

  get ownership(): Ownership {
    return this.deps.ownership;
  }

  get selfId(): string {
    return this.deps.ownership.nodeId;
  }

  /** Does this node hold `queue` now? */
  holds(queue: string): boolean {
    const { ownership } = this.deps;
    return ownership.holds(ownership.partitionOf(queue));
  }

  /** The node that serves `queue` as this node sees it ("" when none does now). */
  ownerOf(queue: string): string {
    const { ownership } = this.deps;
    const route = ownership.route(ownership.partitionOf(queue));
    switch (route.kind) {
      case "local":
      case "claim":
      case "moving":
        return ownership.nodeId;
      case "none":
        return "";
      default:
        return route.nodeId;
    }
  }

  /** The queue's ref; throws WRONG_OWNER (synchronously) when this node does not hold it now. */
  grainFor(queue: string): QueueRef {
    this.checkHeld(queue);
    return this.deps.localRef(queue);
  }

  /**
   * The grain of a queue this node owns, for the lease broker only: a parked Lease call
   * is served synchronously inside the turn that made work dispatchable, which needs the
   * grain itself.
   */
  localGrainFor(queue: string): QueueGrain {
    this.checkHeld(queue);
    return this.deps.localGrain(queue);
  }

  /** The ref of the queue that holds task `id`; NOT_FOUND when no task here has it (or its partition is not held here). */
  grainForTask(id: string): QueueRef {
    const queue = this.queueOfTask(id);
    if (queue === undefined) throw taskNotFound(id);
    return this.grainFor(queue);
  }

  /**
   * The queue of task `id` if this node holds it. Rows of a partition this node does not
   * hold (left behind by a move) are invisible, so exactly one member finds any task.
   */
  queueOfTask(id: string): string | undefined {
    const queue = this.deps.queueOfTask(id);
    return queue !== undefined && this.holds(queue) ? queue : undefined;
  }

  /** Throws WRONG_OWNER (synchronously) when this node does not hold `queue` now. */
  checkHeld(queue: string): void {
    if (this.holds(queue)) return;
    const { ownership } = this.deps;
    // Recorded as this node's, but its membership cannot prove itself alive now (a late
    // keep-alive): FENCED, not a WRONG_OWNER that names this very node.
    if (ownership.route(ownership.partitionOf(queue)).kind === "local") throw fenced(ownership.nodeId);
    throw wrongOwner(queueLabel(queue), this.ownerOf(queue), ownership.ringVersion);
  }
}
