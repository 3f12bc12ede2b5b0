/** `conveyor queue ls|pause|resume|rm`: AdminService queue views and switches. */
import type { Command } from "commander";
import {
  AdminService,
  DeleteQueueResponseSchema,
  ListQueuesResponseSchema,
  PauseQueueResponseSchema,
  ResumeQueueResponseSchema,
  type QueueInfo,
} from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TASK_STATE_NAMES } from "../../src/rpc/wire-names.js";
import type { CliContext } from "../context.js";
import { printJson, printMessage, printLine, printTable, warnSimilarQueue } from "../output.js";

/** StateCounts has one field per task state, named as the state. */
const COUNT_COLUMNS = TASK_STATE_NAMES;

export function registerQueueCommands(program: Command, ctx: CliContext): void {
  const queue = program.command("queue").description("inspect, pause, resume and remove queues");

  queue
    .command("ls")
    .description("list queues with the number of tasks in each state")
    .action(async (_opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).listQueues({}, s.call);
      if (s.json) return printMessage(s.io, ListQueuesResponseSchema, res);
      if (res.queues.length === 0) return printLine(s.io, "no queues");
      printTable(
        s.io,
        ["QUEUE", "PAUSED", ...COUNT_COLUMNS.map((c) => c.toUpperCase())],
        res.queues.map(queueRow),
        ["left", "left", ...COUNT_COLUMNS.map(() => "right" as const)],
      );
    });

  queue
    .command("pause")
    .description("stop dispatching the queue's tasks (enqueueing still works)")
    .argument("<queue>", "queue name")
    .action(async (name: string, _opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).pauseQueue({ queue: name }, s.call);
      warnSimilarQueue(s.io, name, res.similarQueue);
      if (s.json) return printMessage(s.io, PauseQueueResponseSchema, res);
      printLine(s.io, `queue ${res.queue?.name ?? name} paused`);
    });

  queue
    .command("resume")
    .description("dispatch the queue's tasks again")
    .argument("<queue>", "queue name")
    .action(async (name: string, _opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).resumeQueue({ queue: name }, s.call);
      warnSimilarQueue(s.io, name, res.similarQueue);
      if (s.json) return printMessage(s.io, ResumeQueueResponseSchema, res);
      printLine(s.io, `queue ${res.queue?.name ?? name} resumed`);
    });

  registerQueueRemove(queue, ctx);
}

/** `conveyor queue rm QUEUE`: removes a queue with no unfinished task (its finished tasks and settings go too). */
function registerQueueRemove(queue: Command, ctx: CliContext): void {
  queue
    .command("rm")
    .description("remove a queue that holds no unfinished task, with its finished tasks and settings")
    .argument("<queue>", "queue name")
    .action(async (name: string, _opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).deleteQueue({ queue: name }, s.call);
      if (s.json) return printMessage(s.io, DeleteQueueResponseSchema, res);
      const n = res.deletedTasks;
      printLine(s.io, `queue ${name} removed (${n} finished task${n === 1n ? "" : "s"} deleted)`);
    });
}

function queueRow(q: QueueInfo): string[] {
  const counts = q.counts;
  return [q.name, q.paused ? "yes" : "no", ...COUNT_COLUMNS.map((c) => String(counts?.[c] ?? 0n))];
}
