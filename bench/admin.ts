/**
 * Reads a node's durable state through AdminService and TaskService (for checks and
 * baselines); WorkerService for scenarios that lease by hand (no SDK worker loop).
 */
import { AdminService } from "../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskService } from "../src/gen/conveyor/v1/task_service_pb.js";
import { WorkerService } from "../src/gen/conveyor/v1/worker_service_pb.js";
import { RpcChannel } from "../src/rpc/client.js";
import type { UnaryClient } from "../src/rpc/service-definition.js";

export type StateCounts = Record<"scheduled" | "pending" | "aggregating" | "active" | "retry" | "completed" | "archived" | "cancelled", number>;

export class AdminClient {
  private readonly channel: RpcChannel;
  readonly admin: UnaryClient<typeof AdminService>;
  readonly tasks: UnaryClient<typeof TaskService>;
  readonly workers: UnaryClient<typeof WorkerService>;

  constructor(address: string) {
    this.channel = new RpcChannel({ address });
    this.admin = this.channel.service(AdminService);
    this.tasks = this.channel.service(TaskService);
    this.workers = this.channel.service(WorkerService);
  }

  /** Task counts of `queue` by state (zeros when the queue is unknown). */
  async counts(queue: string): Promise<StateCounts> {
    const res = await this.admin.listQueues({}, { timeoutMs: 30_000 });
    const c = res.queues.find((q) => q.name === queue)?.counts;
    return {
      scheduled: Number(c?.scheduled ?? 0n), pending: Number(c?.pending ?? 0n), aggregating: Number(c?.aggregating ?? 0n),
      active: Number(c?.active ?? 0n), retry: Number(c?.retry ?? 0n), completed: Number(c?.completed ?? 0n),
      archived: Number(c?.archived ?? 0n), cancelled: Number(c?.cancelled ?? 0n),
    };
  }

  close(): void {
    this.channel.close();
  }
}

export const fmtCounts = (c: StateCounts): string =>
  Object.entries(c).filter(([, n]) => n > 0).map(([k, n]) => `${k}=${n}`).join(" ") || "empty";
