/** `conveyor worker ls`: the workers calling the node (AdminService.ListWorkers). */
import type { Command } from "commander";
import { AdminService, ListWorkersResponseSchema, type WorkerInfo } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import type { CliContext } from "../context.js";
import { orDash, printLine, printMessage, printTable, relativeTime } from "../output.js";

export function registerWorkerCommands(program: Command, ctx: CliContext): void {
  const worker = program.command("worker").description("inspect the workers calling the node");

  worker
    .command("ls")
    .description("list workers: what each leases from and runs, what it holds, when it was last heard from")
    .action(async (_opts: unknown, cmd: Command) => {
      const s = ctx.session(cmd);
      const res = await s.client(AdminService).listWorkers({}, s.call);
      if (s.json) return printMessage(s.io, ListWorkersResponseSchema, res);
      if (res.workers.length === 0) return printLine(s.io, "no workers");
      const nowMs = Date.now();
      printTable(
        s.io,
        ["WORKER", "HOST", "QUEUES", "TYPES", "IN FLIGHT", "CONCURRENCY", "STATE", "LAST SEEN", "CONNECTED"],
        res.workers.map((w) => workerRow(w, nowMs)),
        ["left", "left", "left", "left", "right", "right", "left", "left", "left"],
      );
    });
}

function workerRow(w: WorkerInfo, nowMs: number): string[] {
  return [
    w.workerId, orDash(w.host), w.queues.join(","), orDash(w.types.join(",")), String(w.inFlight),
    w.concurrency === 0 ? "-" : String(w.concurrency),
    // Polling: idle with a Lease call parked; busy: it holds every slot or is between calls.
    w.polling ? "polling" : "busy",
    relativeTime(Number(w.lastSeenAtMs), nowMs), relativeTime(Number(w.connectedSinceMs), nowMs),
  ];
}
