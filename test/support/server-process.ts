/**
 * A server process a test started (etcd, nats-server): the tail of its output for
 * failure messages, whether it still runs, and how to stop it by PID.
 */
import { spawn, type ChildProcess } from "node:child_process";

/**
 * Where a test server runs: the address it binds, and a command its binary is run under
 * (`ip netns exec <ns>`, test/support/netns.ts). The default is loopback, no prefix.
 */
export interface ProcessHost {
  readonly address: string;
  readonly prefix: readonly string[];
}

export const LOOPBACK: ProcessHost = { address: "127.0.0.1", prefix: [] };

/** Spawns `bin args` on `host` (under its prefix), its output piped. */
export function spawnOn(host: ProcessHost, bin: string, args: string[]): ChildProcess {
  const [file, ...rest] = [...host.prefix, bin, ...args];
  return spawn(file!, rest, { stdio: ["ignore", "pipe", "pipe"] });
}

export class ServerProcess {
  private readonly exited: Promise<void>;
  /** The tail of its stdout and stderr: enough to explain a failure, bounded for long tests. */
  output = "";

  constructor(readonly child: ChildProcess) {
    // "close", not "exit": by then its output has been read to the end.
    this.exited = new Promise((resolve) => child.once("close", () => resolve()));
    const keep = (d: Buffer) => {
      this.output = (this.output + d.toString()).slice(-20_000);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Resolves once it has exited and its output is read to the end. */
  whenExited(): Promise<void> {
    return this.exited;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGTERM, then SIGKILL if it has not exited within 5 s; resolves once it has exited. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 5_000);
    await this.exited;
    clearTimeout(timer);
  }

  /** kill -9. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child.kill("SIGKILL");
    await this.exited;
  }
}
