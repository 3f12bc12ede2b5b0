/**
 * The benchmark's worker process (dist/bench/worker-process.js, started with fork):
 * runs an SDK Worker whose handler is a no-op (or sleeps `sleepMs`) and reports to the
 * parent over IPC: `done` with its timestamp when the expected number of handlers has
 * finished, periodic `progress`, and on request per-task handler timestamps.
 * Optionally the handler is a batch handler (`batch`: one call per fired group, each
 * member counted as a task) or carries concurrency rules (`rules`).
 * Exits when the parent goes away.
 */
import { Mux, Worker, type TaskView } from "../src/index.js";
import { TASK_TYPE, type BatchCalls, type FromWorker, type HandlerRecords, type ToWorker, type WorkerConfig, type WorkerErrors } from "./protocol.js";
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
let calls = emptyCalls();
/** Handler starts more than CLUSTER_GAP_MS apart begin a new cluster: ≈ one Lease response each. */
const CLUSTER_GAP_MS = 0.2;
let clusters = 0;
let lastStartAt = 0;
let errors: WorkerErrors = { count: 0, byContext: {}, samples: [] };

function emptyRecords(): HandlerRecords {
  return { taskId: [], start: [], end: [], sentAt: [], concurrencyKey: [], group: [] };
}

function emptyCalls(): BatchCalls {
  return { start: [], end: [], size: [], groups: [], group: [] };
}

/** `tasks` handled tasks start (a batch call starts all its members). */
function started(at: number, tasks = 1): void {
  if (firstStartAt === 0) firstStartAt = at;
  if (at - lastStartAt > CLUSTER_GAP_MS) clusters += 1;
  lastStartAt = at;
  inFlight += tasks;
  if (inFlight > maxInFlight) maxInFlight = inFlight;
}

function finished(tasks = 1): void {
  inFlight -= tasks;
  completed += tasks;
  if (!doneSent && expect > 0 && completed >= expect) {
    doneSent = true;
    send({ type: "done", completed, at: wallNow(), firstStartAt });
  }
}

async function handle(task: TaskView): Promise<void> {
  const start = wallNow();
  started(start);
  const c = config!;
  // Captured: a `measure` while this handler sleeps starts a new record set.
  const rec = c.record ? records : undefined;
  const index = rec ? rec.start.length : -1;
  if (rec) {
    rec.taskId.push(task.id);
    rec.start.push(start);
    rec.end.push(Number.NaN);
    rec.sentAt.push(sentAtOf(task));
    rec.concurrencyKey.push(task.concurrencyKey);
    rec.group.push(task.group);
  }
  if (c.sleepMs > 0) await sleep(c.sleepMs);
  if (rec) rec.end[index] = wallNow();
  finished();
}

/** A batch handler call: every member is a handled task; the call itself is recorded too. */
async function handleBatch(tasks: TaskView[]): Promise<void> {
  const start = wallNow();
  started(start, tasks.length);
  const c = config!;
  const rec = c.record ? records : undefined;
  const call = c.record ? calls : undefined;
  const first = rec ? rec.start.length : -1;
  const callIndex = call ? call.start.length : -1;
  if (rec && call) {
    const groups = new Set<string>();
    for (const task of tasks) {
      rec.taskId.push(task.id);
      rec.start.push(start);
      rec.end.push(Number.NaN);
      rec.sentAt.push(sentAtOf(task));
      rec.concurrencyKey.push(task.concurrencyKey);
      rec.group.push(task.group);
      groups.add(task.group);
    }
    call.start.push(start);
    call.end.push(Number.NaN);
    call.size.push(tasks.length);
    call.groups.push(groups.size);
    call.group.push(tasks[0]?.group ?? "");
  }
  if (c.sleepMs > 0) await sleep(c.sleepMs);
  const end = wallNow();
  if (rec) rec.end.fill(end, first, first + tasks.length);
  if (call) call.end[callIndex] = end;
  finished(tasks.length);
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
      const c = (config = message.config);
      const mux = new Mux();
      if (c.batch) mux.handleBatch(TASK_TYPE, handleBatch);
      else mux.handle(TASK_TYPE, c.sleepMs > 0 || c.record ? handle : handleNoop, c.rules ? { concurrency: c.rules } : {});
      if (c.expect !== undefined) startMeasuring(c.expect);
      const at = wallNow();
      const w = (worker = new Worker({ mux, address: c.address, queues: [c.queue], concurrency: c.concurrency, onError }).start());
      w.registered.then(
        () => send({ type: "started", pid: process.pid, workerId: w.workerId, at }),
        (error: unknown) => send({ type: "fatal", message: `registration refused: ${error instanceof Error ? error.message : String(error)}` }),
      );
      return;
    }
    case "measure":
      startMeasuring(message.expect);
      return;
    case "report":
      send({ type: "report", records, calls, errors, maxInFlight, startClusters: clusters });
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

/** Resets counters, records and errors; `done` is sent after `n` handled tasks. */
function startMeasuring(n: number): void {
  expect = n;
  completed = 0;
  firstStartAt = 0;
  doneSent = false;
  maxInFlight = inFlight;
  clusters = 0;
  lastStartAt = 0;
  lastProgress = -1;
  records = emptyRecords();
  calls = emptyCalls();
  errors = { count: 0, byContext: {}, samples: [] };
}

/** The no-op handler: counts and returns (nothing to await). */
function handleNoop(): void {
  started(wallNow());
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
