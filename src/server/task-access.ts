/**
 * Task reads and actions by id, shared by TaskService and AdminService: a read goes to
 * storage (a durable fact, no grain activated), an action goes through the owning
 * queue's ref and answers with the row after the owner's commit.
 */
import { taskNotFound } from "../base/errors.js";
import type { Router } from "../cluster/router.js";
import type { TaskAction } from "../grains/queue/queue-grain.js";
import type { TaskRecord } from "../grains/queue/task.js";
import type { AttemptRecord } from "../grains/queue/attempts.js";

export interface TaskAccess {
  getTaskOrThrow: (id: string) => TaskRecord;
  /** A task's attempts, oldest first (a read; empty for an unknown id). */
  attemptsOf: (id: string) => AttemptRecord[];
  /** Runs an action on a task through its queue's ref and returns the task afterwards (durable). */
  actOnTask: (id: string, action: TaskAction) => Promise<TaskRecord | undefined>;
}

export function taskAccess(
  router: Pick<Router, "grainForTask" | "holds">,
  store: { getTask(id: string): TaskRecord | undefined; attemptsOf(id: string): AttemptRecord[] },
): TaskAccess {
  return {
    // Rows of a partition this node does not hold (left behind by a move) are not its to show.
    getTaskOrThrow: (id) => {
      const task = store.getTask(id);
      if (task === undefined || !router.holds(task.queue)) throw taskNotFound(id);
      return task;
    },
    attemptsOf: (id) => store.attemptsOf(id),
    actOnTask: (id, action) => router.grainForTask(id).act(id, action),
  };
}
