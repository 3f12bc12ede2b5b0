/**
 * Logs storage refusals (a full disk, a failing file) without flooding: the first of a
 * reason is logged at once with its message, the ones after it within an interval are
 * counted and logged as one line when the interval ends. A full disk under load refuses
 * hundreds of writes a second; a stack for each (1.4 KB a line) only fills the log
 * further. Errors that are not storage refusals (bugs) are logged in full, every time.
 */
import type { Logger } from "pino";
import type { Clock } from "../base/clock.js";
import { ConveyorError } from "../base/errors.js";

export const STORAGE_FAULT_LOG_INTERVAL_MS = 10_000;

const STORAGE_REASONS: ReadonlySet<string> = new Set(["DISK_FULL", "STORAGE_FAILURE"]);

interface Window {
  suppressed: number;
  message: string;
}

export class StorageFaultLog {
  private readonly windows = new Map<string, Window>();

  constructor(private readonly logger: Logger, private readonly clock: Clock, private readonly intervalMs = STORAGE_FAULT_LOG_INTERVAL_MS) {}

  /** `what` says what failed ("a commit", "a grain's write", "a call refused before its turn"). */
  note(error: unknown, what: string, fields: Record<string, unknown> = {}): void {
    if (!(error instanceof ConveyorError) || !STORAGE_REASONS.has(error.reason)) {
      this.logger.error({ ...fields, err: error }, `storage failure: ${what}`);
      return;
    }
    const open = this.windows.get(error.reason);
    if (open) {
      open.suppressed += 1;
      open.message = error.message;
      return;
    }
    this.logger.error({ ...fields, reason: error.reason, detail: error.message },
      `storage refused a write (${what}); more of these in the next ${this.intervalMs / 1000} s are counted in one line`);
    const window: Window = { suppressed: 0, message: error.message };
    // The clock's timers do not hold the process open (unref).
    this.clock.setTimer(this.intervalMs, () => {
      this.windows.delete(error.reason);
      if (window.suppressed > 0) {
        this.logger.error({ reason: error.reason, detail: window.message, refused: window.suppressed },
          `storage refused ${window.suppressed} more writes in the last ${this.intervalMs / 1000} s`);
      }
    });
    this.windows.set(error.reason, window);
  }
}
