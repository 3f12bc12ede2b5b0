/**
 * Starts a real conveyord (bin/conveyord.js, which runs dist/src/main.js) on loopback
 * with ephemeral ports and a fresh temp data dir, and stops it by PID.
 *
 * BENCH_DAEMON_ARGS adds node flags to the daemon, e.g.
 *   BENCH_DAEMON_ARGS="--cpu-prof --cpu-prof-dir=/tmp/conveyor-prof" node dist/bench/run.js --only e2e
 * (a CPU profile is written when the daemon exits cleanly, which `stop()` lets it do).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { removeDir, trackChild, trackDir, waitExit } from "./processes.js";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");
const CONVEYORD = join(REPO_ROOT, "bin/conveyord.js");
const START_TIMEOUT_MS = 20_000;
const LOG_TAIL = 40;

export interface DaemonOptions {
  /** --set key=value settings. */
  settings?: Record<string, string>;
  /** Names the temp dir, for humans looking at /tmp. */
  label?: string;
  /** Runs on this existing data dir instead of a fresh one; the caller owns it (stop() leaves it). */
  dataDir?: string;
  /** How long to wait for "conveyord listening" (default 20 s; a large data dir may need more). */
  startTimeoutMs?: number;
  /**
   * Node flags for this daemon, after BENCH_DAEMON_ARGS. With `--inspect=127.0.0.1:0`
   * the daemon's DevTools address is kept as `inspectorUrl` (bench/inspector.ts).
   */
  nodeArgs?: string[];
}

export interface Health {
  grains: number;
  parkedLeases: number;
}

export class Daemon {
  private readonly exited: Promise<number | null>;

  private constructor(
    readonly child: ChildProcess,
    readonly dataDir: string,
    readonly grpcAddress: string,
    readonly httpAddress: string,
    private readonly logTail: string[],
    /** False when the caller brought the data dir (it outlives the daemon). */
    private readonly ownsDataDir: boolean,
    /** ws://… of the daemon's inspector, when it was started with --inspect. */
    readonly inspectorUrl: string | undefined,
  ) {
    this.exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  static async start(options: DaemonOptions = {}): Promise<Daemon> {
    const ownsDataDir = options.dataDir === undefined;
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), `conveyor-bench-${options.label ?? "node"}-`));
    if (ownsDataDir) trackDir(dataDir);
    const nodeFlags = [...(process.env.BENCH_DAEMON_ARGS ?? "").split(/\s+/).filter(Boolean), ...(options.nodeArgs ?? [])];
    const args = [...nodeFlags, CONVEYORD, "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "info"];
    for (const [k, v] of Object.entries(options.settings ?? {})) args.push("--set", `${k}=${v}`);
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"], env: daemonEnv() });
    trackChild(child, "conveyord");
    const logTail: string[] = [];
    const remember = (line: string) => {
      logTail.push(line);
      if (logTail.length > LOG_TAIL) logTail.shift();
    };
    let inspectorUrl: string | undefined;
    createInterface({ input: child.stderr! }).on("line", (line) => {
      inspectorUrl ??= /Debugger listening on (ws:\/\/\S+)/.exec(line)?.[1];
      remember(`[stderr] ${line}`);
    });
    const lines = createInterface({ input: child.stdout! });
    try {
      const listening = await new Promise<{ grpc: string; http: string }>((resolve, reject) => {
        const timeoutMs = options.startTimeoutMs ?? START_TIMEOUT_MS;
        const timer = setTimeout(() => reject(new Error(`conveyord did not start within ${timeoutMs} ms`)), timeoutMs);
        child.once("error", (e) => {
          clearTimeout(timer);
          reject(e);
        });
        child.once("exit", (code, signal) => {
          clearTimeout(timer);
          reject(new Error(`conveyord exited (${code ?? signal}) before listening`));
        });
        lines.on("line", (line) => {
          remember(line);
          try {
            const entry = JSON.parse(line) as { msg?: string; grpc?: string; http?: string };
            if (entry.msg === "conveyord listening" && entry.grpc && entry.http) {
              clearTimeout(timer);
              resolve({ grpc: entry.grpc, http: entry.http });
            }
          } catch {
            // not a JSON log line
          }
        });
      });
      return new Daemon(child, dataDir, listening.grpc, listening.http, logTail, ownsDataDir, inspectorUrl);
    } catch (error) {
      if (child.pid !== undefined && child.exitCode === null) process.kill(child.pid, "SIGKILL");
      if (ownsDataDir) removeDir(dataDir);
      throw new Error(`${(error as Error).message}\n${logTail.join("\n")}`);
    }
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** GET /healthz. */
  async health(): Promise<Health> {
    const res = await fetch(`http://${this.httpAddress}/healthz`);
    return (await res.json()) as Health;
  }

  /** The sum of a Prometheus counter or gauge over its labels (GET /metrics); 0 when absent. */
  async metric(name: string): Promise<number> {
    const text = await (await fetch(`http://${this.httpAddress}/metrics`)).text();
    let sum = 0;
    for (const line of text.split("\n")) {
      if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.slice(line.lastIndexOf(" ") + 1)) || 0;
    }
    return sum;
  }

  /**
   * A Prometheus counter or gauge summed per value of one label (GET /metrics), e.g.
   * metricBy("conveyor_rpc_duration_seconds_count", "method") → { Lease: 612, Settle: 830 }.
   */
  async metricBy(name: string, label: string): Promise<Record<string, number>> {
    const text = await (await fetch(`http://${this.httpAddress}/metrics`)).text();
    const out: Record<string, number> = {};
    const pattern = new RegExp(`[{,]${label}="([^"]*)"`);
    for (const line of text.split("\n")) {
      if (!line.startsWith(`${name}{`)) continue;
      const key = pattern.exec(line)?.[1] ?? "";
      out[key] = (out[key] ?? 0) + (Number(line.slice(line.lastIndexOf(" ") + 1)) || 0);
    }
    return out;
  }

  /** Recent log lines (for error reports). */
  logs(): string {
    return this.logTail.join("\n");
  }

  /** SIGTERM to its PID (a clean exit, so --cpu-prof is written), SIGKILL after 15 s; removes the data dir it made. */
  async stop(): Promise<void> {
    if (this.alive) process.kill(this.pid, "SIGTERM");
    await waitExit(this.child, 15_000);
    await this.exited;
    if (this.ownsDataDir) removeDir(this.dataDir);
  }
}

/** The daemon's environment without CONVEYOR_* settings that would change what is measured. */
function daemonEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CONVEYOR_")) env[k] = v;
  return env;
}
