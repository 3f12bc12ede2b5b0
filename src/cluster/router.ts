/**
 * Routes every queue call to the grain that owns the queue. Services never reach a
 * grain any other way, so clustering adds remote owners here instead of rewiring
 * callers. Today a call for a queue owned elsewhere fails with UNAVAILABLE /
 * WRONG_OWNER naming the owner; forwarding arrives with the clustering issue.
 */
import { ConveyorError, taskNotFound } from "../base/errors.js";
import { quote } from "../base/limits.js";
import type { QueueGrain } from "../grains/queue/queue-grain.js";
import type { Ring } from "./ring.js";

export interface RouterDeps {
  selfId: string;
  ring: () => Ring;
  /** The local grain host. */
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

  grainFor(queue: string): QueueGrain {
    const owner = this.ownerOf(queue);
    if (owner !== this.deps.selfId) {
      throw new ConveyorError("UNAVAILABLE", "WRONG_OWNER", `queue ${quote(queue)} is owned by node ${owner}`);
    }
    return this.deps.localGrain(queue);
  }

  /** The grain of the queue that holds task `id`; NOT_FOUND when no task has it. */
  grainForTask(id: string): QueueGrain {
    const queue = this.deps.queueOfTask(id);
    if (queue === undefined) throw taskNotFound(id);
    return this.grainFor(queue);
  }
}
