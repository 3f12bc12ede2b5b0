/**
 * Runs a bulk action (and a queue's removal) as a sequence of grain turns, awaiting each
 * turn's commit before the next: between batches the event loop serves everyone else, so
 * a bulk action over many tasks never holds the grain (a lease call or an enqueue for the
 * same queue is answered between two batches). The answer comes once every batch is
 * committed.
 *
 * Why it lives at the owner (behind `QueueRef`): the batches are the owner's turns, and
 * only the owner can await its own commits; a remote ref forwards one call.
 */
import { BULK_ACTION_BATCH_MAX_TASKS } from "../../base/limits.js";
import type { BulkAction } from "../queue/bulk-actions.js";
import type { QueueGrain } from "../queue/queue-grain.js";
import { FINISHED_STATES, type TaskState } from "../queue/task.js";

/** Runs one synchronous grain turn now and resolves with its value after the commit. */
export type TurnRunner = <T>(turn: (grain: QueueGrain) => T) => Promise<T>;

/** Applies `action` to every task of the queue in `state`, batch by batch; resolves with how many it changed. */
export async function runBulkAction(run: TurnRunner, action: BulkAction, state: TaskState): Promise<number> {
  let affected = 0;
  if (FINISHED_STATES.has(state)) {
    if (action !== "retry" && action !== "delete") return 0;
    for (let after = 0, more = true; more;) {
      const batch = await run((grain) => grain.bulkFinished(action, state, after));
      affected += batch.affected;
      after = batch.lastRowid;
      more = batch.more;
    }
    return affected;
  }
  if (action === "retry") return 0;
  // The snapshot of ids is taken in the first batch's turn.
  let ids: string[] = [];
  affected += await run((grain) => {
    ids = grain.idsInState(state);
    return grain.bulkUnfinished(action, state, ids.slice(0, BULK_ACTION_BATCH_MAX_TASKS));
  });
  for (let i = BULK_ACTION_BATCH_MAX_TASKS; i < ids.length; i += BULK_ACTION_BATCH_MAX_TASKS) {
    const batch = ids.slice(i, i + BULK_ACTION_BATCH_MAX_TASKS);
    affected += await run((grain) => grain.bulkUnfinished(action, state, batch));
  }
  return affected;
}

/**
 * Removes a queue: refused (NOT_FOUND, or FAILED_PRECONDITION with the count) unless it
 * exists and holds no unfinished task; then its finished tasks are deleted in batches and
 * a last turn deletes its settings, after which `retire` drops the grain. Tasks that
 * arrive meanwhile and finish are deleted by another round; one that is still unfinished
 * at the last turn refuses it (the finished tasks already deleted stay deleted).
 * Resolves with how many finished tasks were deleted.
 */
export async function runQueueRemoval(run: TurnRunner, retire: () => void): Promise<number> {
  const refusal = await run((grain) => grain.removalRefusal());
  if (refusal) throw refusal;
  let deleted = 0;
  for (;;) {
    for (const state of FINISHED_STATES) deleted += await runBulkAction(run, "delete", state);
    const removed = await run((grain) => {
      if (grain.hasTasks()) {
        const stillRefused = grain.removalRefusal();
        if (stillRefused) throw stillRefused;
        return false; // tasks that finished since: another round deletes them
      }
      grain.removeSettings();
      retire();
      return true;
    });
    if (removed) return deleted;
  }
}
