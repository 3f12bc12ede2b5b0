/**
 * Runs test/support/signal-worker.mjs (a Worker with its default signal handling) as a
 * child process and lets a test wait for the lines it prints. Never sleeps: every wait
 * is on a line or on the process's exit.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { REPO_ROOT } from "./node-process.js";

export interface Line {
  text: string;
  /** When this process read it (Date.now()). */
  atMs: number;
}

export class WorkerProcess {
  readonly lines: Line[] = [];
  stderr = "";
  private readonly waiters: Array<{ match: (l: Line) => boolean; resolve: (l: Line) => void }> = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;

  private constructor(readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal, atMs: Date.now() })));
    child.stderr!.on("data", (d: Buffer) => (this.stderr += d.toString()));
    createInterface({ input: child.stdout! }).on("line", (text) => {
      const line = { text, atMs: Date.now() };
      this.lines.push(line);
      for (const w of [...this.waiters]) {
        if (w.match(line)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    });
  }

  static start(address: string, queue: string): WorkerProcess {
    const script = join(REPO_ROOT, "test/support/signal-worker.mjs");
    return new WorkerProcess(spawn(process.execPath, [script, address, queue], { stdio: ["ignore", "pipe", "pipe"] }));
  }

  /** The first line (already printed or to come) that contains `text`. */
  waitFor(text: string, timeoutMs = 10_000): Promise<Line> {
    const match = (l: Line) => l.text.includes(text);
    const seen = this.lines.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker printed no line with ${JSON.stringify(text)} in ${timeoutMs} ms; got:\n${this.lines.map((l) => l.text).join("\n")}\nstderr: ${this.stderr}`)), timeoutMs);
      this.waiters.push({ match, resolve: (l) => { clearTimeout(timer); resolve(l); } });
    });
  }

  /** For cleanup after a failed test. */
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

/** A loopback port nothing listens on (bound once by the OS, then released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
