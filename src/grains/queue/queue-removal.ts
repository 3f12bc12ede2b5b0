/**
 * Removing a queue: a queue that holds no unfinished task forgets its settings (the
 * paused flag, limits and rate limit on its row, its group overrides, its rule keys'
 * dynamic limits, its schedules) in one turn, through the same grain that writes them.
 *
 * Why a part of its own: removal must see every setting the other parts keep, and it is
 * refused while any task is unfinished (those tasks are the grain's to finish). Its
 * finished tasks are deleted by the shell beforehand, in bounded batches; this is the
 * last turn, after which the shell deactivates the grain.
 *
 * Invariant: either nothing changes and the error says how many tasks are unfinished, or
 * every setting's row is deleted in this turn.
 */
import { ConveyorError } from "../../base/errors.js";
import { quote } from "../../base/limits.js";
import type { CoreMemory } from "./core-memory.js";
import type { FiredGroups } from "./fired-groups.js";
import type { Schedules } from "./schedules.js";

export class QueueRemoval {
  constructor(
    private readonly memory: CoreMemory,
    private readonly groups: FiredGroups,
    private readonly schedules: Schedules,
  ) {}

  /** Deletes the queue's settings; refused while it holds unfinished tasks. */
  remove(): ConveyorError | null {
    const refusal = this.refusal();
    if (refusal) return refusal;
    this.groups.clearConfigs();
    this.schedules.clear();
    this.memory.persist({ kind: "clearSlotLimits" });
    this.memory.persist({ kind: "deleteQueue" });
    return null;
  }

  /** Why the queue cannot be removed now, or null. */
  refusal(): ConveyorError | null {
    const unfinished = this.memory.entries.size;
    if (unfinished === 0) return null;
    return new ConveyorError("FAILED_PRECONDITION", "QUEUE_HAS_UNFINISHED_TASKS",
      `queue ${quote(this.memory.queue)} holds ${unfinished} unfinished task${unfinished === 1 ? "" : "s"}; ` +
      "cancel or delete them first (conveyor task cancel-all / delete-all)");
  }
}
