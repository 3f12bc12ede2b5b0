/** The parent's handle on a worker process (bench/worker-process.ts), forked with IPC. */
import { fork, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { trackChild, waitExit } from "./processes.js";
import type { BatchCalls, FromWorker, HandlerRecords, ToWorker, WorkerConfig, WorkerErrors } from "./protocol.js";
import { wallNow } from "./time.js";

const ENTRY = join(import.meta.dirname, "worker-process.js");

export type DoneMessage = Extract<FromWorker, { type: "done" }>;
export type ProgressMessage = Extract<FromWorker, { type: "progress" }>;
export interface WorkerReport {
  records: HandlerRecords;
  /** Batch handler calls (empty unless the worker runs a batch handler with `record`). */
  calls: BatchCalls;
  errors: WorkerErrors;
  maxInFlight: number;
  startClusters: number;
}

export class WorkerProcess {
  private done: DoneMessage | undefined;
  private doneWaiters: Array<(m: DoneMessage) => void> = [];
  private replyWaiters = new Map<string, Array<(m: FromWorker) => void>>();
  private fatal: string | undefined;
  /** Latest progress message of the current measurement and when it arrived. */
  lastProgress: ProgressMessage | undefined;
  lastProgressAt = 0;

  /**
   * @param startedAt the worker's wallNow() just before its SDK Worker started (it had
   * registered its types by the time `start` resolved).
   */
  private constructor(readonly child: ChildProcess, readonly workerId: string, readonly startedAt: number) {}

  get pid(): number {
    return this.child.pid!;
  }

  /**
   * Forks the worker process and starts its SDK Worker on `config.queue`; resolves once
   * the worker has registered its task types (and rules). With `config.expect` the
   * worker is measuring from the start (no `measure` call needed).
   */
  static async start(config: WorkerConfig): Promise<WorkerProcess> {
    const execArgv = (process.env.BENCH_WORKER_ARGS ?? "").split(/\s+/).filter(Boolean);
    const child = fork(ENTRY, [], { stdio: ["ignore", "inherit", "inherit", "ipc"], execArgv, env: workerEnv() });
    trackChild(child, "worker");
    const started = await new Promise<Extract<FromWorker, { type: "started" }>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("worker process did not start within 10 s")), 10_000);
      child.once("exit", (code) => reject(new Error(`worker process exited (${code}) before starting`)));
      child.once("error", reject);
      child.on("message", function onMessage(raw) {
        const m = raw as FromWorker;
        if (m.type === "started") {
          clearTimeout(timer);
          child.off("message", onMessage);
          resolve(m);
        } else if (m.type === "fatal") {
          reject(new Error(`worker process failed: ${m.message}`));
        }
      });
      child.send({ type: "init", config } satisfies ToWorker);
    });
    const handle = new WorkerProcess(child, started.workerId, started.at);
    if (config.expect !== undefined) handle.lastProgressAt = wallNow();
    child.on("message", (raw) => handle.onMessage(raw as FromWorker));
    return handle;
  }

  /** Resets the worker's counters and records; `waitDone` resolves after `expect` handlers. */
  measure(expect: number): void {
    this.done = undefined;
    this.lastProgress = undefined;
    this.lastProgressAt = wallNow();
    this.send({ type: "measure", expect });
  }

  /**
   * Resolves with the worker's `done` message. Fails when no handler finished for
   * `stallMs` (the engine stalled) or the process died; `onProgress` sees each update.
   */
  async waitDone(options: { stallMs: number; onProgress?: (p: ProgressMessage) => void; describeStall?: () => Promise<string> }): Promise<DoneMessage> {
    if (this.done) return this.done;
    const { stallMs, onProgress, describeStall } = options;
    return new Promise<DoneMessage>((resolve, reject) => {
      let lastSeen: ProgressMessage | undefined;
      const check = setInterval(() => {
        if (this.fatal) finish(new Error(`worker process failed: ${this.fatal}`));
        else if (this.child.exitCode !== null || this.child.signalCode !== null) finish(new Error("worker process exited while measuring"));
        else if (this.lastProgress !== lastSeen) {
          lastSeen = this.lastProgress;
          if (lastSeen) onProgress?.(lastSeen);
        } else if (wallNow() - this.lastProgressAt > stallMs) {
          const seen = this.lastProgress ? `${this.lastProgress.completed}/${this.lastProgress.expect} completed` : "no handler finished";
          const fail = (extra: string) => finish(new Error(`stalled: ${seen}, no progress for ${stallMs} ms${extra}`));
          clearInterval(check);
          if (describeStall) describeStall().then((d) => fail(`; ${d}`), () => fail(""));
          else fail("");
        }
      }, 200);
      const finish = (result: DoneMessage | Error) => {
        clearInterval(check);
        this.doneWaiters = this.doneWaiters.filter((w) => w !== onDone);
        if (result instanceof Error) reject(result);
        else resolve(result);
      };
      const onDone = (m: DoneMessage) => finish(m);
      this.doneWaiters.push(onDone);
    });
  }

  /** Per-task handler records and error counts of the current measurement. */
  async report(): Promise<WorkerReport> {
    const m = await this.request({ type: "report" }, "report");
    if (m.type !== "report") throw new Error("unexpected reply");
    return { records: m.records, calls: m.calls, errors: m.errors, maxInFlight: m.maxInFlight, startClusters: m.startClusters };
  }

  /**
   * Estimates the worker's wallNow() minus ours from IPC round trips (best of `rounds`);
   * should be ~0 on one machine. Returns the offset and the round trip it came from.
   */
  async clockOffset(rounds = 20): Promise<{ offsetMs: number; rttMs: number }> {
    let best = { offsetMs: Number.NaN, rttMs: Number.POSITIVE_INFINITY };
    for (let i = 0; i < rounds; i++) {
      const sentAt = wallNow();
      const m = await this.request({ type: "ping", sentAt }, "pong");
      const back = wallNow();
      if (m.type === "pong" && back - sentAt < best.rttMs) best = { offsetMs: m.at - (sentAt + back) / 2, rttMs: back - sentAt };
    }
    return best;
  }

  /** Graceful stop of the SDK Worker, then exit; SIGKILL by PID after 5 s. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    if (this.child.connected) this.send({ type: "stop" });
    await waitExit(this.child, 5_000);
  }

  private request(message: ToWorker, replyType: FromWorker["type"]): Promise<FromWorker> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker process did not answer ${message.type} within 10 s`)), 10_000);
      const list = this.replyWaiters.get(replyType) ?? [];
      list.push((m) => {
        clearTimeout(timer);
        resolve(m);
      });
      this.replyWaiters.set(replyType, list);
      this.send(message);
    });
  }

  private send(message: ToWorker): void {
    this.child.send(message);
  }

  private onMessage(m: FromWorker): void {
    switch (m.type) {
      case "progress":
        this.lastProgress = m;
        this.lastProgressAt = wallNow();
        return;
      case "done":
        this.done = m;
        for (const w of [...this.doneWaiters]) w(m);
        return;
      case "fatal":
        this.fatal = m.message;
        return;
      default: {
        const waiter = this.replyWaiters.get(m.type)?.shift();
        waiter?.(m);
      }
    }
  }
}

function workerEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CONVEYOR_")) env[k] = v;
  return env;
}
