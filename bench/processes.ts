/**
 * Every child process and temp dir the benchmark creates is registered here, so that
 * an error, Ctrl-C or a normal exit kills the children (by PID) and removes the dirs.
 */
import type { ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";

const children = new Map<number, { child: ChildProcess; name: string }>();
const dirs = new Set<string>();

export function trackChild(child: ChildProcess, name: string): void {
  const pid = child.pid;
  if (pid === undefined) return;
  children.set(pid, { child, name });
  child.once("exit", () => children.delete(pid));
}

export function trackDir(dir: string): void {
  dirs.add(dir);
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  dirs.delete(dir);
}

/** Synchronous last-resort cleanup: SIGKILL every live child, remove every temp dir. */
export function killAll(): void {
  for (const [pid, { child }] of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
  children.clear();
  for (const dir of dirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
  dirs.clear();
}

/** Waits for `child` to exit; after `graceMs` sends SIGKILL to its PID. */
export async function waitExit(child: ChildProcess, graceMs: number): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const timer = setTimeout(() => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }, graceMs);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Installs handlers that clean up on Ctrl-C, SIGTERM and process exit. */
export function installCleanupHandlers(): void {
  process.once("exit", killAll);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}: killing ${children.size} child process(es)\n`);
      killAll();
      process.exit(signal === "SIGINT" ? 130 : 143);
    });
  }
}
