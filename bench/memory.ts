/** Memory of a process from Linux /proc, and how the bench prints sizes. */
import { readFileSync } from "node:fs";

export interface Resident {
  /** VmRSS: resident now. */
  rssBytes: number;
  /** VmHWM: the highest resident set since the process started. */
  peakBytes: number;
}

/** The resident set of `pid` and its peak; undefined off Linux (or once it has exited). */
export function residentOf(pid: number): Resident | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN) * 1024;
    return { rssBytes: kb("VmRSS"), peakBytes: kb("VmHWM") };
  } catch {
    return undefined;
  }
}

export const MB = 2 ** 20;

/** Bytes as MB with one decimal. */
export const fmtMB = (bytes: number | undefined): string => (bytes === undefined || Number.isNaN(bytes) ? "?" : (bytes / MB).toFixed(1));
