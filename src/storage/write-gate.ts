/**
 * Refuses grain writes up front while the disk is known to be full, so that a full disk
 * costs a refused call nothing. Without it every call that writes would run its turn,
 * fail at COMMIT, and leave its grain's memory ahead of disk: the grain is dropped and
 * the next call reloads it from SQLite (a backlog of 300,000 tasks, 11-12 times in 15 s
 * under one polling worker). A refusal known before the turn leaves the grain untouched.
 *
 * The gate closes on a DISK_FULL failure (a write's or a commit's) and opens again when
 * the file system reports at least SPACE_REGAINED_BYTES more free space than it had at
 * the failure (an operator freed space: writes resume at once), or, whatever statfs says
 * (a quota it does not show), after a backoff that doubles with each failure that comes
 * within a minute of the one before (1 s up to 30 s), commits in between or not: a disk
 * that takes small commits and refuses larger ones still costs one failed commit (and
 * the reload of the grains it touched) per backoff at most. A wrong guess costs one
 * failed commit.
 */
import { statfsSync } from "node:fs";
import { ConveyorError } from "../base/errors.js";

const SPACE_REGAINED_BYTES = 1024 * 1024;
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
/** A failure this long after the previous one starts the backoff over. */
const BACKOFF_MEMORY_MS = 60_000;

interface Closed {
  error: ConveyorError;
  /** Free bytes when the write failed (undefined: statfs could not tell). */
  freeBytes: number | undefined;
  reopenAtMs: number;
}

export interface WriteGateOptions {
  /** Free bytes for unprivileged writers on the data directory's file system; undefined when unknown. */
  freeBytes?: () => number | undefined;
  nowMs?: () => number;
}

export class WriteGate {
  private closed: Closed | undefined;
  private backoffMs = 0;
  private lastFailureAtMs = -Infinity;
  private readonly freeBytes: () => number | undefined;
  private readonly nowMs: () => number;

  constructor(dataDir: string, options: WriteGateOptions = {}) {
    this.freeBytes = options.freeBytes ?? (() => freeBytesOf(dataDir));
    this.nowMs = options.nowMs ?? Date.now;
  }

  /** A write or commit failed with `error`: a full disk closes the gate. */
  failed(error: unknown): void {
    if (!(error instanceof ConveyorError) || error.reason !== "DISK_FULL") return;
    const nowMs = this.nowMs();
    // A failure while closed (a write that was not asked first, such as a heartbeat's) changes nothing.
    if (!this.closed) {
      const recent = nowMs - this.lastFailureAtMs < BACKOFF_MEMORY_MS;
      this.backoffMs = recent ? Math.min(this.backoffMs * 2, BACKOFF_MAX_MS) : BACKOFF_FIRST_MS;
    }
    this.lastFailureAtMs = nowMs;
    this.closed = {
      error: new ConveyorError(error.code, error.reason, error.message),
      freeBytes: this.freeBytes(),
      reopenAtMs: nowMs + this.backoffMs,
    };
  }

  /** The error a write would get now without trying it, or undefined when it may be tried. */
  refusal(): ConveyorError | undefined {
    const closed = this.closed;
    if (!closed) return undefined;
    if (this.nowMs() >= closed.reopenAtMs || this.spaceRegained(closed)) {
      this.closed = undefined;
      return undefined;
    }
    return closed.error;
  }

  private spaceRegained(closed: Closed): boolean {
    if (closed.freeBytes === undefined) return false;
    const now = this.freeBytes();
    return now !== undefined && now >= closed.freeBytes + SPACE_REGAINED_BYTES;
  }
}

function freeBytesOf(dir: string): number | undefined {
  if (dir === ":memory:") return undefined;
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}
