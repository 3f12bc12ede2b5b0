/**
 * Backlogs of pending tasks (issue 15, "scale on one node"; bench/backlog.ts does the
 * work): `--pending-tasks` (default 1,000,000) in one queue; the same over 10,000
 * concurrency keys under a per-key limit of 1, leased until every key is saturated (so
 * the rest of the backlog is held); and the same spread over 1,000 queues, all active.
 */
import { runBacklog } from "../backlog.js";
import type { Scenario } from "../scenario.js";

export const pendingScenario: Scenario = {
  name: "pending",
  description: "a backlog of pending tasks in one queue: memory per task, RSS, restart to ready, enqueue rate at the start vs the end",
  run: async (ctx) => [await runBacklog(ctx, { name: "pending", tasks: ctx.options.pendingTasks, queues: 1, keys: 0 })],
};

export const pendingKeysScenario: Scenario = {
  name: "pending-keys",
  description: "the pending backlog over 10,000 concurrency keys with a per-key limit of 1, every key saturated",
  run: async (ctx) => [await runBacklog(ctx, {
    name: "pending-keys", tasks: ctx.options.pendingTasks, queues: 1, keys: 10_000, keyLimit: 1, saturateKeys: true,
  })],
};

export const pendingQueuesScenario: Scenario = {
  name: "pending-queues",
  description: "the pending backlog spread over 1,000 queues, every one active after the restart",
  run: async (ctx) => [await runBacklog(ctx, { name: "pending-queues", tasks: ctx.options.pendingTasks, queues: 1_000, keys: 0 })],
};
