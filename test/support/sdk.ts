/** Shared SDK plumbing for integration tests. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect } from "vitest";
import { Client, ConveyorError, Mux, Worker, type WorkerOptions } from "../../src/index.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { WorkerService } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import type { Delivery } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import type { NodeProcess } from "./node-process.js";
import { REPO_ROOT, eventually } from "./node-process.js";

const execFileAsync = promisify(execFile);

/** Runs the real `conveyor` CLI against a node; rejects (with code and stderr) on exit 1. */
export function runCli(node: NodeProcess, ...args: string[]) {
  return execFileAsync(process.execPath, [join(REPO_ROOT, "bin/conveyor.js"), "--server", node.grpcAddress, ...args]);
}

export function connect(node: NodeProcess) {
  const channel = new RpcChannel({ address: node.grpcAddress });
  const client = new Client({ address: node.grpcAddress });
  const workers: Worker[] = [];
  return {
    client,
    admin: channel.service(AdminService),
    workerRpc: channel.service(WorkerService),
    taskRpc: channel.service(TaskService),
    /** Starts a worker on this node; stopped by close(). */
    worker(mux: Mux, options: Omit<WorkerOptions, "mux" | "address"> = {}): Worker {
      const w = new Worker({ mux, address: node.grpcAddress, ...options }).start();
      workers.push(w);
      return w;
    },
    /** What a Lease call gets right now (no waiting): the node's dispatch decision at this instant. */
    async leaseNow(queue: string, max = 100): Promise<Delivery[]> {
      const res = await channel.service(WorkerService).lease({ workerId: "test", queues: [{ queue, weight: 1 }], maxDeliveries: max, waitMs: 0 });
      return res.deliveries;
    },
    /** Waits until the task reaches `state` (another process decides when). */
    async waitForState(id: string, state: string, timeoutMs = 10_000) {
      return eventually(`task ${id} to be ${state}`, async () => {
        const t = await client.getTask(id);
        return t.state === state ? t : undefined;
      }, timeoutMs);
    },
    async counts(queue: string) {
      const res = await channel.service(AdminService).listQueues({});
      const q = res.queues.find((x) => x.name === queue);
      const c = q?.counts;
      return {
        scheduled: Number(c?.scheduled ?? 0n), pending: Number(c?.pending ?? 0n), active: Number(c?.active ?? 0n),
        retry: Number(c?.retry ?? 0n), completed: Number(c?.completed ?? 0n), archived: Number(c?.archived ?? 0n),
        cancelled: Number(c?.cancelled ?? 0n), aggregating: Number(c?.aggregating ?? 0n), paused: q?.paused ?? false,
      };
    },
    async close() {
      await Promise.all(workers.map((w) => w.stop({ graceMs: 0 })));
      client.close();
      channel.close();
    },
  };
}

/** A promise with its resolver, for handlers that report to the test. */
export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** The ConveyorError a call was refused with (the test fails when it succeeded or failed otherwise). */
export async function rejection(call: Promise<unknown>): Promise<ConveyorError> {
  const error = await call.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ConveyorError);
  return error as ConveyorError;
}

/** What an enqueue's promise settled with: its info, or its ConveyorError's public fields. */
export async function outcome(p: Promise<unknown>): Promise<unknown> {
  try {
    return { ok: await p };
  } catch (e) {
    if (!(e instanceof ConveyorError)) throw e;
    return { code: e.code, reason: e.reason, message: e.message, field: e.field, details: e.details };
  }
}
