/**
 * The cluster fault tests' checker (issue 13): a producer and a worker that record every
 * acknowledged enqueue, every failed SDK call, every delivery (task, lease, handler start
 * and end, outcome) and every error the worker reports, and a verdict at the end:
 * - 0 lost: every acknowledged task ran to completion, and the cluster says it completed;
 * - a task ran twice only after a lease lapse or a release (its earlier run failed, or the
 *   later one began at least one lease TTL after it: a lapsed lease is given a full TTL,
 *   also after a handoff);
 * - per (queue, concurrency key), never more handlers at once than the limit.
 * Handler intervals are measured in this process, so the overlap check needs no clock
 * agreement with the nodes; the server keeps a slot until the settle, so a handler
 * overlap is a lower bound of the server's, and any excess is a real one.
 */
import { readFile } from "node:fs/promises";
import { ConveyorError, Mux, Worker, json, newTask, type Client } from "../../src/index.js";
import { eventually } from "./node-process.js";

/** Concurrency keys the producer spreads tasks over, round-robin. */
export const KEYS = ["k0", "k1", "k2"];

interface Delivery {
  taskId: string;
  leaseId: string;
  slot: string;
  startMs: number;
  endMs: number | undefined;
  failed: boolean;
}

export interface Verdict {
  acknowledged: number;
  deliveries: number;
  lost: string[];
  notCompleted: string[];
  unexplainedReruns: string[];
  maxPerKey: number;
}

export class Checker {
  /** Acknowledged enqueues: task id → its (queue, key) slot. */
  readonly acknowledged = new Map<string, string>();
  /** When each acknowledged enqueue was answered, and when it was sent (performance.now()). */
  readonly acknowledgedAtMs = new Map<string, number>();
  readonly sentAtMs = new Map<string, number>();
  /** Every SDK call that surfaced an error to its caller. */
  readonly failures: Array<{ op: string; error: unknown; phase: string }> = [];
  /** What the test is doing now, named in each failure. */
  phase = "start";
  /** Errors the worker handled itself (retried), by context: reported, not failures. */
  readonly workerReports: Array<{ context: string; error: unknown }> = [];
  readonly deliveries: Delivery[] = [];
  /** The longest an acknowledged enqueue took, and when it was sent. */
  maxCallMs = 0;
  /** Every producer call: when it was sent (performance.now()), how long it took, whether it was acknowledged. */
  readonly calls: Array<{ startMs: number; ms: number; ok: boolean }> = [];
  private readonly completed = new Set<string>();
  private readonly running = new Map<string, number>();
  private maxRunning = 0;

  /** A handler for the worker: records the run around `body`. */
  track(body: () => Promise<void>) {
    return async (task: { id: string; queue: string; concurrencyKey?: string }, ctx: { leaseId: string }) => {
      const slot = `${task.queue}/${task.concurrencyKey ?? ""}`;
      const d: Delivery = { taskId: task.id, leaseId: ctx.leaseId, slot, startMs: performance.now(), endMs: undefined, failed: false };
      this.deliveries.push(d);
      this.running.set(slot, (this.running.get(slot) ?? 0) + 1);
      this.maxRunning = Math.max(this.maxRunning, this.running.get(slot)!);
      try {
        await body();
        this.completed.add(task.id);
      } catch (error) {
        d.failed = true;
        throw error;
      } finally {
        d.endMs = performance.now();
        this.running.set(slot, this.running.get(slot)! - 1);
      }
    };
  }

  /** Has every acknowledged task run to completion in the worker? */
  allRan(): boolean {
    for (const id of this.acknowledged.keys()) if (!this.completed.has(id)) return false;
    return true;
  }

  /**
   * The verdict: asks `client` for every acknowledged task's state (a few calls at a
   * time), so a task that ran but whose completion was not kept is caught too. A task
   * still unfinished is asked about again until a lease TTL and a margin have passed: one
   * whose settle came too late (LEASE_NOT_HELD, its lease lapsed during a fault) runs
   * again once its lease runs out, which is at-least-once working, not a loss.
   */
  async verify(client: Client, leaseTtlMs: number): Promise<Verdict> {
    await eventually("every acknowledged task to run in the worker", async () => (this.allRan() ? true : undefined), 60_000)
      .catch(() => undefined);
    const lost = [...this.acknowledged.keys()].filter((id) => !this.completed.has(id));
    let unfinished = await statesNotCompleted(client, [...this.acknowledged.keys()]);
    if (unfinished.length > 0) {
      await eventually("every acknowledged task completed on the node", async () => {
        unfinished = await statesNotCompleted(client, unfinished.map(([id]) => id));
        return unfinished.length === 0 ? true : undefined;
      }, leaseTtlMs + 20_000).catch(() => undefined);
    }
    const notCompleted = unfinished.map(([id, state]) => `${id}: ${state}`);
    const byTask = new Map<string, Delivery[]>();
    for (const d of this.deliveries) byTask.set(d.taskId, [...(byTask.get(d.taskId) ?? []), d]);
    const unexplainedReruns: string[] = [];
    for (const [id, runs] of byTask) {
      for (let i = 1; i < runs.length; i++) {
        const prev = runs[i - 1]!;
        const next = runs[i]!;
        const lapsed = next.startMs - prev.startMs >= leaseTtlMs;
        if (!prev.failed && !lapsed) {
          unexplainedReruns.push(`${id}: run ${i + 1} (lease ${next.leaseId}) began ${Math.round(next.startMs - prev.startMs)} ms after run ${i} (lease ${prev.leaseId}), which did not fail`);
        }
      }
    }
    return { acknowledged: this.acknowledged.size, deliveries: this.deliveries.length, lost, notCompleted, unexplainedReruns, maxPerKey: this.maxRunning };
  }
}

/** The tasks of `ids` that are not completed on the node, with their state (or the error asking for it), a few calls at a time. */
async function statesNotCompleted(client: Client, ids: readonly string[]): Promise<Array<[string, string]>> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < ids.length; i += 32) {
    const part = ids.slice(i, i + 32);
    const states = await Promise.all(part.map((id) => client.getTask(id).then((t) => t.state as string, (e: unknown) => `error: ${String(e)}`)));
    states.forEach((state, j) => {
      if (state !== "completed") out.push([part[j]!, state]);
    });
  }
  return out;
}

/** A producer enqueueing round-robin over `queues` (and over KEYS) until stopped. */
export function runProducer(checker: Checker, client: Client, queues: string[]) {
  let stop = false;
  let sent = 0;
  const done = (async () => {
    for (let i = 0; !stop; i++) {
      const queue = queues[i % queues.length]!;
      const key = KEYS[i % KEYS.length]!;
      const t0 = performance.now();
      sent += 1;
      try {
        const info = await client.enqueue(newTask("job", json({ i })), { queue, concurrencyKey: key });
        checker.acknowledged.set(info.id, `${queue}/${key}`);
        checker.acknowledgedAtMs.set(info.id, performance.now());
        checker.sentAtMs.set(info.id, t0);
        checker.maxCallMs = Math.max(checker.maxCallMs, performance.now() - t0);
        checker.calls.push({ startMs: t0, ms: performance.now() - t0, ok: true });
      } catch (error) {
        checker.failures.push({ op: `enqueue ${queue}`, error, phase: checker.phase });
        checker.calls.push({ startMs: t0, ms: performance.now() - t0, ok: false });
      }
    }
  })();
  return {
    get sent() {
      return sent;
    },
    stop: async () => {
      stop = true;
      await done;
    },
  };
}

/**
 * A worker on `address` draining `queues`, each run recorded by `checker`. Its handlers
 * take a few ms, so tasks of one key would overlap if a limit of 1 did not hold.
 */
export function runWorker(checker: Checker, address: string, queues: string[], closers: Array<() => unknown>): Worker {
  const worker = new Worker({
    address, queues, concurrency: 16, handleSignals: false, leaseWaitMs: 500, logger: null,
    onError: (error, context) => {
      checker.workerReports.push({ context, error });
      // A settle item refused (not a call that failed and is retried) is a failure,
      // LEASE_NOT_HELD included: leases last 30 s here, so none lapses, and a settle the
      // SDK sends again after a call that failed UNAVAILABLE while its partition moved is
      // answered OK by the new owner (it knows the lease that ended the attempt).
      if (context === "settle" && error instanceof ConveyorError && error.code !== "UNAVAILABLE") {
        checker.failures.push({ op: "settle", error, phase: checker.phase });
      }
    },
    mux: new Mux().handle("job", checker.track(() => new Promise((resolve) => setTimeout(resolve, 5)))),
  });
  closers.push(() => worker.stop());
  worker.start();
  return worker;
}

/** A one-line summary of failures for an assertion message. */
export function describeFailures(checker: Checker): string {
  return checker.failures.slice(0, 10).map((f) => `${f.op} (${f.phase}): ${f.error instanceof ConveyorError ? `${f.error.code}/${f.error.reason} ${f.error.message}` : String(f.error)}`).join("\n");
}

/** VmRSS of a process in MiB, from /proc/<pid>/status. */
export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]);
  return Math.round(kb / 1024);
}
