/**
 * WAL checkpoints on a thread of their own, so that the node's event loop never waits
 * for the disk.
 *
 * With journal_mode=WAL and synchronous=NORMAL a COMMIT writes the WAL and never
 * fsyncs; the fsyncs happen at checkpoints (the WAL before its pages are copied into
 * the database file, the file after). SQLite's automatic checkpoint runs inside the
 * COMMIT that crosses 1,000 WAL pages, on the committing connection: measured here, one
 * such COMMIT blocks the event loop ~4-6 ms, every ~0.4 s at 200 tasks/s, and those
 * stalls were most of the pickup latency's tail (docs/decisions/0004-wal-checkpoints-on-a-thread.md;
 * measured in bench/results/). So the node's connection turns automatic checkpoints off, and a
 * worker thread with its own connection runs PASSIVE checkpoints: they copy committed
 * pages into the file while the node goes on committing (a passive checkpoint takes no
 * lock a writer waits for).
 *
 * A WAL starts again from its beginning only when a write begins with every frame
 * copied, and a checkpoint running beside steady commits is always overtaken by the
 * next one: under sustained load the file would grow for as long as the load lasts.
 * So once a checkpoint leaves more than `resetFrames` frames in the WAL, the node's own
 * connection runs one checkpoint itself between two of its transactions (`catchUp`):
 * it has only the frames written since the thread's last copy to do, and the next write
 * restarts the WAL. That is one short stall per `resetFrames` frames (64 MiB of WAL at
 * the default) instead of one per 4 MiB.
 *
 * The thread starts with the checkpointer (starting one costs the event loop ~10 ms: not
 * on the way of a commit). A checkpoint that fails (a full disk: the database file cannot
 * grow) leaves the WAL as it was and is tried again at the next interval; the first of a
 * run of failures is reported. If the thread cannot start or dies, the node's connection
 * turns SQLite's automatic checkpoints back on: slower, never unsafe.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type BetterSqlite3 from "better-sqlite3";

/** At most one background checkpoint starts per this interval. */
export const CHECKPOINT_INTERVAL_MS = 100;
/** WAL frames left after a checkpoint beyond which the node's connection catches up (4 KiB pages: 64 MiB). */
export const WAL_RESET_FRAMES = 16_384;
/** How long `close` waits for a checkpoint in progress to end before it closes anyway. */
const CLOSE_WAIT_MS = 10_000;
/** SQLite's own threshold, restored on a failure. */
const SQLITE_AUTOCHECKPOINT_PAGES = 1000;

/** What a checkpoint reported (PRAGMA wal_checkpoint's row). */
export interface CheckpointReport {
  /** Frames in the WAL when it ran. */
  log: number;
  /** Frames copied into the database file (all of `log` unless a reader or writer held some back). */
  checkpointed: number;
}

export interface WalCheckpointerOptions {
  intervalMs?: number;
  resetFrames?: number;
  /**
   * Told of the first failed checkpoint of a run (`fallback` false: retried), and once if
   * the thread stops (`fallback` true: SQLite's own checkpoints took over).
   */
  onFailure?: ((error: Error, fallback: boolean) => void) | undefined;
}

/**
 * The thread's code. A string, not a module file, so that it runs from the compiled
 * package and from the TypeScript sources (tests) alike; it loads better-sqlite3 from the
 * path the main thread resolved.
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Sqlite = require(workerData.sqliteModule);
const done = new Int32Array(workerData.closed);
// A connection that cannot open ends the thread (its "error" event: SQLite's own checkpoints
// take over), with a plain Error: a SqliteError reaches the main thread without its message.
let db;
try {
  db = new Sqlite(workerData.path, { fileMustExist: true });
  db.pragma("busy_timeout = 5000");
} catch (error) {
  throw new Error(String(error && error.message || error));
}
parentPort.on("message", (message) => {
  if (message === "close") {
    try { db.close(); } catch {}
    Atomics.store(done, 0, 1);
    Atomics.notify(done, 0);
    parentPort.close();
    return;
  }
  try {
    const [row] = db.pragma("wal_checkpoint(PASSIVE)");
    parentPort.postMessage({ log: row.log, checkpointed: row.checkpointed });
  } catch (error) {
    parentPort.postMessage({ error: String(error && error.message || error) });
  }
});
`;

export class WalCheckpointer {
  private worker: Worker | undefined;
  private closedFlag: Int32Array | undefined;
  private inFlight = false;
  private lastStartedAt = Number.NEGATIVE_INFINITY;
  private catchUpDue = false;
  private failed = false;
  private failing = false;
  private closed = false;
  /** Checkpoints the thread completed; for tests and metrics. */
  checkpoints = 0;
  /** The last report (the thread's, or the node connection's catch-up). */
  lastReport: CheckpointReport | undefined;
  private readonly intervalMs: number;
  private readonly resetFrames: number;

  constructor(
    private readonly sqlite: BetterSqlite3.Database,
    private readonly path: string,
    private readonly options: WalCheckpointerOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? CHECKPOINT_INTERVAL_MS;
    this.resetFrames = options.resetFrames ?? WAL_RESET_FRAMES;
    sqlite.pragma("wal_autocheckpoint = 0");
    // After a WAL restart, keep its file no larger than the catch-up threshold.
    sqlite.pragma(`journal_size_limit = ${this.resetFrames * 4096}`);
    this.start();
  }

  /**
   * Called after each COMMIT of the node's connection (no transaction open): runs the
   * catch-up when one is due, and starts a background checkpoint when none runs and the
   * last started at least `intervalMs` ago.
   */
  committed(): void {
    if (this.failed || this.closed) return;
    if (this.catchUpDue && !this.inFlight) {
      this.catchUpDue = false;
      // No background checkpoint right after it: one running when the next write begins
      // could keep that write from restarting the WAL.
      this.catchUp();
      return;
    }
    if (this.inFlight || performance.now() - this.lastStartedAt < this.intervalMs) return;
    const worker = this.worker;
    if (!worker) return;
    this.inFlight = true;
    this.lastStartedAt = performance.now();
    worker.postMessage("checkpoint");
  }

  /** Stops the thread (after a checkpoint in progress ends) and closes its connection. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopThread();
  }

  /**
   * Asks the thread to close its connection and waits for it, synchronously on purpose:
   * Database.close() is, and a connection left open in a dying thread would keep its
   * locks on the file for the life of the process.
   */
  private stopThread(): void {
    const worker = this.worker;
    const flag = this.closedFlag;
    this.worker = undefined;
    if (!worker || !flag) return;
    worker.postMessage("close");
    Atomics.wait(flag, 0, 0, CLOSE_WAIT_MS);
    void worker.terminate();
  }

  private start(): Worker | undefined {
    try {
      const closed = new SharedArrayBuffer(4);
      const worker = new Worker(THREAD_SOURCE, {
        eval: true,
        workerData: { path: this.path, sqliteModule: createRequire(import.meta.url).resolve("better-sqlite3"), closed },
      });
      worker.unref();
      worker.on("message", (message: CheckpointReport | { error: string }) => this.answered(message));
      // The thread itself died (its connection with it): nothing is left to close.
      worker.on("error", (error) => {
        this.worker = undefined;
        this.fail(error);
      });
      this.worker = worker;
      this.closedFlag = new Int32Array(closed);
      return worker;
    } catch (error) {
      this.fail(error);
      return undefined;
    }
  }

  private answered(message: CheckpointReport | { error: string }): void {
    this.inFlight = false;
    if ("error" in message) {
      if (!this.failing) this.options.onFailure?.(new Error(`background WAL checkpoint failed: ${message.error}`), false);
      this.failing = true;
      return;
    }
    this.failing = false;
    this.checkpoints += 1;
    this.lastReport = message;
    if (message.log > this.resetFrames) this.catchUpDue = true;
  }

  /** The node's connection copies what the thread has not yet, so the next write restarts the WAL. */
  private catchUp(): void {
    try {
      const [row] = this.sqlite.pragma("wal_checkpoint(PASSIVE)") as Array<{ log: number; checkpointed: number }>;
      if (row) this.lastReport = { log: row.log, checkpointed: row.checkpointed };
    } catch {
      // A failed checkpoint leaves the WAL as it was; the next report asks again.
    }
  }

  private fail(error: unknown): void {
    if (this.failed || this.closed) return;
    this.failed = true;
    this.inFlight = false;
    try {
      this.sqlite.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT_PAGES}`);
    } catch {
      // The connection is in trouble; its next statement will say so to its caller.
    }
    this.stopThread();
    this.options.onFailure?.(new Error(`the WAL checkpoint thread stopped: ${messageOf(error)}`), true);
  }
}

/** An error's message; a thread's error may come as a plain object with one. */
function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | undefined)?.message;
  return typeof message === "string" ? message : String(error);
}
