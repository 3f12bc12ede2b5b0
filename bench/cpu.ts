/**
 * CPU time of processes (Linux /proc), to tell whether a process was saturated during a
 * measurement: a daemon at ~100% of one core is the bottleneck of a single-threaded engine.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** user+system CPU milliseconds consumed so far by `pid`; undefined off Linux. */
export function cpuMsOf(pid: number): number | undefined {
  if (pid === process.pid) {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields after the command name start at field 3 (state); utime is 14, stime 15.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / clockTicks();
  } catch {
    return undefined;
  }
}

/** CPU use of named processes over an interval, as % of one core. */
export class CpuMeter {
  private readonly start = new Map<string, number | undefined>();
  private readonly startedAt = performance.now();

  constructor(private readonly pids: Record<string, number>) {
    for (const [name, pid] of Object.entries(pids)) this.start.set(name, cpuMsOf(pid));
  }

  /** e.g. { daemon: 97, worker: 41, bench: 60 } (percent of one core). */
  read(): Record<string, number> {
    return this.reading(0).percent;
  }

  /**
   * Both figures from one read of each process: percent of one core over the interval, and
   * µs of CPU per task for `tasks` tasks (the yardstick of the engine's cost: a process at
   * 90 % of a core tells that it is busy, not what a task costs it).
   */
  reading(tasks: number): CpuReading {
    const wall = performance.now() - this.startedAt;
    const percent: Record<string, number> = {};
    const usPerTask: Record<string, number> = {};
    for (const [name, pid] of Object.entries(this.pids)) {
      const before = this.start.get(name);
      const after = cpuMsOf(pid);
      if (before === undefined || after === undefined || wall <= 0) continue;
      percent[name] = Math.round(((after - before) / wall) * 100);
      if (tasks > 0) usPerTask[name] = Math.round(((after - before) * 1000) / tasks);
    }
    return { percent, usPerTask };
  }
}

export interface CpuReading {
  /** Percent of one core per process over the interval. */
  percent: Record<string, number>;
  /** µs of CPU per task per process (empty when no task count was given). */
  usPerTask: Record<string, number>;
}

/** "daemon 90%, worker 30%", or with a reading "daemon 90% (176 µs/task), worker 30% (59 µs/task)". */
export const fmtCpu = (cpu: Record<string, number> | CpuReading): string => {
  const reading = "percent" in cpu && typeof cpu.percent === "object" ? (cpu as CpuReading) : { percent: cpu as Record<string, number>, usPerTask: {} };
  return Object.entries(reading.percent)
    .map(([k, v]) => `${k} ${v}%${reading.usPerTask[k] !== undefined ? ` (${reading.usPerTask[k]} µs/task)` : ""}`)
    .join(", ");
};

function machineTicks(): { busy: number; total: number } | undefined {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    const idle = fields[3]! + fields[4]!; // idle + iowait
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

/**
 * How busy the whole machine is over `ms` (percent of all CPUs), sampled while the
 * benchmark itself is idle: anything above a few percent is other work competing with
 * the measurement. Undefined off Linux.
 */
export async function machineBusyPercent(ms = 1_000): Promise<number | undefined> {
  const a = machineTicks();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const b = machineTicks();
  if (!a || !b || b.total === a.total) return undefined;
  return Math.round(((b.busy - a.busy) / (b.total - a.total)) * 100);
}

/** Bytes a process has written so far (/proc/PID/io): `wchar` through write calls, `writeBytes` sent to storage. */
export function ioOf(pid: number): { wchar: number; writeBytes: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/io`, "utf8");
    const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(text)?.[1] ?? Number.NaN);
    return { wchar: field("wchar"), writeBytes: field("write_bytes") };
  } catch {
    return undefined;
  }
}
