/**
 * Routes every queue call to the owner of the queue. Services never reach a grain any
 * other way: they get a `QueueRef` (Promise-returning, resolves after the owner's
 * commit), so clustering adds remote refs here instead of rewiring callers. Today a call
 * for a queue owned elsewhere fails with UNAVAILABLE / WRONG_OWNER, whose details name the
 * owner and the ring version;
 * forwarding arrives with the clustering issue.
 */
import { taskNotFound, wrongOwner } from "../base/errors.js";
import type { QueueGrain } from "../grains/queue/queue-grain.js";
import type { QueueRef } from "../grains/runtime/queue-ref.js";
import type { Ring } from "./ring.js";

export interface RouterDeps {
  selfId: string;
  ring: () => Ring;
  /** A ref on a queue this node owns. */
  localRef: (queue: string) => QueueRef;
  /** The local grain itself, for the lease broker's synchronous long-poll path. */
  localGrain: (queue: string) => QueueGrain;
  /** Which queue a task id lives in (the task directory). */
  queueOfTask: (id: string) => string | undefined;
}

export class Router {
  constructor(private readonly deps: RouterDeps) {}

  /** The ring this node routes with now. */
  get ring(): Ring {
    return this.deps.ring();
  }

  get selfId(): string {
    return this.deps.selfId;
  }

  ownerOf(queue: string): string {
    return this.deps.ring().ownerOf(queue);
  }

  /** The queue's ref; throws WRONG_OWNER (synchronously) when another node owns it. */
  grainFor(queue: string): QueueRef {
    this.checkOwned(queue);
    return this.deps.localRef(queue);
  }

  /**
   * The grain of a queue this node owns, for the lease broker only: a parked Lease call
   * is served synchronously inside the turn that made work dispatchable, which needs the
   * grain itself. A Lease call for a queue owned elsewhere goes to that node's broker.
   */
  localGrainFor(queue: string): QueueGrain {
    this.checkOwned(queue);
    return this.deps.localGrain(queue);
  }

  /** The ref of the queue that holds task `id`; NOT_FOUND when no task has it. */
  grainForTask(id: string): QueueRef {
    const queue = this.deps.queueOfTask(id);
    if (queue === undefined) throw taskNotFound(id);
    return this.grainFor(queue);
  }

  private checkOwned(queue: string): void {
    const ring = this.deps.ring();
    const owner = ring.ownerOf(queue);
    if (owner !== this.deps.selfId) throw wrongOwner(queue, owner, ring.version);
  }
}
