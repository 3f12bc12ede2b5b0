/**
 * Starts a real conveyord process on 127.0.0.1 with a temp data dir (ephemeral ports),
 * for integration tests. Waits for its "conveyord listening" log line, never sleeps.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");
const DAEMON = join(REPO_ROOT, "bin/conveyord.js");
/**
 * Bound on a start (spawn → listening). Generous: on the shared 2-core machine at load
 * 20+, three nodes starting at once took over 20 s (the cluster fault tests saw it).
 */
const START_TIMEOUT_MS = 60_000;

export interface NodeProcessOptions {
  /** Extra settings passed as --set key=value (e.g. { lease_ttl: "1s" }). */
  settings?: Record<string, string>;
  /** Reuse a data dir (for restart tests). */
  dataDir?: string;
  /** Reuse fixed ports (for restart tests); default ephemeral. */
  grpcPort?: number;
  httpPort?: number;
  /** A command that runs conveyord (e.g. inside `unshare`): spawned as prefix[0] with prefix[1..], node and its args. */
  prefix?: readonly string[];
  /** The address both ports bind (default 127.0.0.1); e.g. a network namespace's own (netns.ts). */
  host?: string;
  /** Extra command-line arguments (e.g. --insecure-allow-unauthenticated-network). */
  args?: readonly string[];
  /** The conveyord script to run; default the checkout's bin/conveyord.js. */
  bin?: string;
  /** A conveyor.yaml (--config); the flags above still win. */
  config?: string;
  /** Extra environment variables of the process. */
  env?: Record<string, string>;
}

export class NodeProcess {
  private exited: Promise<number | null>;
  readonly logs: string[] = [];
  /** Everything the process wrote to stderr so far (Node's warnings land here). */
  stderr = "";

  private constructor(
    readonly child: ChildProcess,
    readonly dataDir: string,
    readonly grpcAddress: string,
    readonly httpAddress: string,
    private readonly options: NodeProcessOptions,
  ) {
    this.exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  }

  static async start(options: NodeProcessOptions = {}): Promise<NodeProcess> {
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "conveyor-test-"));
    const host = options.host ?? "127.0.0.1";
    const args = [options.bin ?? DAEMON, "--data-dir", dataDir, "--listen", `${host}:${options.grpcPort ?? 0}`,
      "--http", `${host}:${options.httpPort ?? 0}`, "--log-level", "info", ...(options.args ?? [])];
    if (options.config) args.push("--config", options.config);
    for (const [k, v] of Object.entries(options.settings ?? {})) args.push("--set", `${k}=${v}`);
    const [file, ...fileArgs] = [...(options.prefix ?? []), process.execPath, ...args];
    const child = spawn(file!, fileArgs, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...options.env } });
    const logs: string[] = [];
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const lines = createInterface({ input: child.stdout! });
    const listening = await new Promise<{ grpc: string; http: string }>((resolve, reject) => {
      // Killed on a timeout, so a node that never listens is not left behind; its last log
      // lines say where it was waiting.
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`conveyord did not start in ${START_TIMEOUT_MS / 1000}s; stderr: ${stderr}; last log lines:\n${logs.slice(-8).join("\n")}`));
      }, START_TIMEOUT_MS);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`conveyord exited with ${code} before listening; stderr: ${stderr}; last log lines:\n${logs.slice(-8).join("\n")}`));
      });
      lines.on("line", (line) => {
        logs.push(line);
        try {
          const entry = JSON.parse(line) as { msg?: string; grpc?: string; http?: string };
          if (entry.msg === "conveyord listening") {
            clearTimeout(timer);
            resolve({ grpc: entry.grpc!, http: entry.http! });
          }
        } catch {
          // not JSON: ignore
        }
      });
    });
    const node = new NodeProcess(child, dataDir, listening.grpc, listening.http, options);
    node.logs.push(...logs);
    node.stderr = stderr;
    child.stderr!.on("data", (d: Buffer) => (node.stderr += d.toString()));
    lines.on("line", (line) => node.logs.push(line));
    return node;
  }

  get grpcPort(): number {
    return Number(this.grpcAddress.split(":").pop());
  }

  get httpPort(): number {
    return Number(this.httpAddress.split(":").pop());
  }

  /** kill -9: no shutdown code runs. */
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }

  /** SIGTERM and wait for a clean exit; returns the exit code. */
  async stop(): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.child.exitCode;
    this.child.kill("SIGTERM");
    return this.exited;
  }

  /** Starts a new process on the same data dir and ports. */
  restart(extra: NodeProcessOptions = {}): Promise<NodeProcess> {
    return NodeProcess.start({ ...this.options, ...extra, dataDir: this.dataDir, grpcPort: this.grpcPort, httpPort: this.httpPort });
  }

  async metrics(): Promise<string> {
    const res = await fetch(`http://${this.httpAddress}/metrics`);
    return res.text();
  }

  /** Removes the data dir (after the process is gone). */
  cleanup(): void {
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/**
 * Runs conveyord on `dataDir` expecting it to refuse to start: resolves to its exit code
 * and stderr once it exits (rejects if it starts listening instead).
 */
export async function startRefused(dataDir: string): Promise<{ code: number | null; stderr: string; ms: number }> {
  const startedAt = Date.now();
  const child = spawn(process.execPath, [DAEMON, "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"],
    { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (line.includes("conveyord listening")) child.kill("SIGKILL");
  });
  // "close", not "exit": stderr is complete only once the pipes have closed.
  const code = await new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
  if (code === null) throw new Error(`conveyord started on ${dataDir} instead of refusing`);
  return { code, stderr, ms: Date.now() - startedAt };
}

/**
 * Polls `probe` until it returns a value that is not undefined. For observing another
 * process's state (there is no in-process signal to await); the timeout message names
 * what was expected and what was last seen.
 */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const start = Date.now();
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}; last error: ${String(last)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
