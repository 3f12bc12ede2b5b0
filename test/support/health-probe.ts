/**
 * Runs work against a node while a separate process probes its /healthz back to back
 * (health-prober.mjs: a process of its own, so that this process's own work cannot
 * delay the probes), and reports the probes that overlapped the work.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { NodeProcess } from "./node-process.js";
import { REPO_ROOT } from "./node-process.js";

export interface Probe {
  startMs: number;
  endMs: number;
  wallMs: number;
  /** How long the node's event loop kept this probe waiting (see health-prober.mjs). */
  blockedMs: number;
}

export interface ProbeReport {
  /** Probes that were in flight while the work ran. */
  during: Probe[];
  failures: number;
  lastError: string;
  /** False when the node's CPU time could not be read (not Linux): blockedMs is then wall time. */
  cpuMeasured: boolean;
  worst: Probe | undefined;
}

/** The worst probe in flight during [startMs, endMs] (undefined when none was). */
export function worstBetween(probes: readonly Probe[], startMs: number, endMs: number): Probe | undefined {
  return probes
    .filter((p) => p.endMs >= startMs && p.startMs <= endMs)
    .reduce<Probe | undefined>((w, p) => (!w || p.blockedMs > w.blockedMs ? p : w), undefined);
}

export async function probeDuring(node: NodeProcess, work: () => Promise<void>): Promise<ProbeReport> {
  const prober = spawn(process.execPath, [join(REPO_ROOT, "test/support/health-prober.mjs"), node.httpAddress, String(node.child.pid)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: prober.stdout! })[Symbol.asyncIterator]();
  const ready = await lines.next();
  if (ready.value !== "ready") throw new Error(`health prober did not start: ${String(ready.value)}`);
  const startMs = Date.now();
  try {
    await work();
  } finally {
    prober.stdin!.end("stop\n");
  }
  const endMs = Date.now();
  const out = await lines.next();
  const stats = JSON.parse(out.value as string) as { probes: Probe[]; failures: number; lastError: string; cpuMeasured: boolean };
  const during = stats.probes.filter((p) => p.endMs >= startMs && p.startMs <= endMs);
  return { during, failures: stats.failures, lastError: stats.lastError, cpuMeasured: stats.cpuMeasured, worst: worstBetween(during, startMs, endMs) };
}
