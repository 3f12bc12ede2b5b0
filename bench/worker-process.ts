/**
 * The benchmark's worker process (dist/bench/worker-process.js, started with fork):
 * runs an SDK Worker whose handler is a no-op (or sleeps `sleepMs`) and reports to the
 * parent over IPC: `done` with its timestamp when the expected number of handlers has
 * finished, periodic `progress`, and on request per-task handler timestamps.
 * Exits when the parent goes away.
 */
import { Mux, Worker, type TaskView } from "../src/index.js";
import { TASK_TYPE, type FromWorker, type HandlerRecords, type ToWorker, type WorkerConfig, type WorkerErrors } from "./protocol.js";
import { sleep, wallNow } from "./time.js";

const PROGRESS_EVERY_MS = 250;

const send = (message: FromWorker) => process.send!(message);

let worker: Worker | undefined;
let config: WorkerConfig | undefined;
let expect = 0;
let completed = 0;
let firstStartAt = 0;
let doneSent = false;
let inFlight = 0;
let maxInFlight = 0;
let records = emptyRecords();
const errors: WorkerErrors = { count: 0, byContext: {}, samples: [] };

function emptyRecords(): HandlerRecords {
  return { taskId: [], start: [], end: [], sentAt: [], concurrencyKey: [], group: [] };
}

function finished(): void {
  inFlight -= 1;
  completed += 1;
  if (!doneSent && expect > 0 && completed >= expect) {
    doneSent = true;
    send({ type: "done", completed, at: wallNow(), firstStartAt });
  }
}

async function handle(task: TaskView): Promise<void> {
  const start = wallNow();
  if (firstStartAt === 0) firstStartAt = start;
  inFlight += 1;
  if (inFlight > maxInFlight) maxInFlight = inFlight;
  const c = config!;
  let index = -1;
  if (c.record) {
    index = records.start.length;
    records.taskId.push(task.id);
    records.start.push(start);
    records.end.push(Number.NaN);
    records.sentAt.push(sentAtOf(task));
    records.concurrencyKey.push(task.concurrencyKey);
    records.group.push(task.group);
  }
  if (c.sleepMs > 0) await sleep(c.sleepMs);
  if (index >= 0) records.end[index] = wallNow();
  finished();
}

function sentAtOf(task: TaskView): number {
  try {
    const ts = task.json<{ ts?: unknown }>().ts;
    return typeof ts === "number" ? ts : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

function onError(error: unknown, context: string): void {
  errors.count += 1;
  errors.byContext[context] = (errors.byContext[context] ?? 0) + 1;
  if (errors.samples.length < 5) errors.samples.push(`${context}: ${error instanceof Error ? error.message : String(error)}`);
}

let lastProgress = -1;
setInterval(() => {
  if (expect > 0 && completed !== lastProgress) {
    lastProgress = completed;
    send({ type: "progress", completed, expect, inFlight });
  }
}, PROGRESS_EVERY_MS).unref();

process.on("message", (raw) => {
  const message = raw as ToWorker;
  switch (message.type) {
    case "init": {
      config = message.config;
      const mux = new Mux().handle(TASK_TYPE, config.sleepMs > 0 || config.record ? handle : handleNoop);
      worker = new Worker({ mux, address: config.address, queues: [config.queue], concurrency: config.concurrency, onError }).start();
      send({ type: "started", pid: process.pid, workerId: worker.workerId });
      return;
    }
    case "measure":
      expect = message.expect;
      completed = 0;
      firstStartAt = 0;
      doneSent = false;
      maxInFlight = inFlight;
      lastProgress = -1;
      records = emptyRecords();
      return;
    case "report":
      send({ type: "report", records, errors, maxInFlight });
      return;
    case "ping":
      send({ type: "pong", sentAt: message.sentAt, at: wallNow() });
      return;
    case "stop":
      void (async () => {
        await worker?.stop({ graceMs: 1_000 });
        process.send!({ type: "stopped" } satisfies FromWorker, () => process.exit(0));
      })();
      return;
  }
});

/** The no-op handler: counts and returns (nothing to await). */
function handleNoop(): void {
  if (firstStartAt === 0) firstStartAt = wallNow();
  inFlight += 1;
  if (inFlight > maxInFlight) maxInFlight = inFlight;
  finished();
}

// The parent went away (exited or was killed): do not linger.
process.on("disconnect", () => process.exit(0));
process.on("uncaughtException", (error) => {
  try {
    send({ type: "fatal", message: error.stack ?? error.message });
  } finally {
    process.exit(1);
  }
});
