/** What a Worker and its lease loops write to their log, and the helpers that word it. */

/** Where a Worker writes what it does on its own (pino and console fit). */
export interface WorkerLogger {
  info(message: string): void;
  warn(message: string): void;
}

/** The default logger: one line per event on stderr. */
export const stderrLogger: WorkerLogger = {
  info: (message) => process.stderr.write(`conveyor worker: ${message}\n`),
  warn: (message) => process.stderr.write(`conveyor worker: ${message}\n`),
};
export const silentLogger: WorkerLogger = { info: () => {}, warn: () => {} };

export const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
export const secondsSince = (ms: number) => ((Date.now() - ms) / 1000).toFixed(1);

/** The start line: where it polls, what it runs, how much at once. */
export function startLine(w: { address: string; queues: readonly string[]; concurrency: number; types: readonly string[]; batchTypes: readonly string[] }): string {
  const types = w.types.length > 0 ? w.types.join(", ") : "(none)";
  const batches = w.batchTypes.length > 0 ? `; batch types ${w.batchTypes.join(", ")}` : "";
  return `starting: node ${w.address}, queues ${w.queues.join(", ")}, concurrency ${w.concurrency}, task types ${types}${batches}`;
}

/** Characters of an error a failure line shows: the task keeps all of it (`task get`). */
export const LOGGED_ERROR_MAX_CHARS = 500;

/**
 * A failed attempt's line: type, id, attempt, error (its first LOGGED_ERROR_MAX_CHARS
 * characters) and what the node does next. The worker knows the task's retries as leased:
 * a failure with none left is archived, as is one wrapped with skipRetry.
 */
export function failureLine(t: { type: string; id: string; retried: number; maxRetry: number }, error: string, skipRetry: boolean): string {
  const attempt = `attempt ${t.retried + 1} of ${t.maxRetry + 1}`;
  const next = skipRetry ? "archived (skip retry)" : t.retried >= t.maxRetry ? "archived (no retries left)" : "the node retries it";
  const shown = error.length > LOGGED_ERROR_MAX_CHARS ? `${error.slice(0, LOGGED_ERROR_MAX_CHARS)}… (${error.length} characters)` : error;
  return `task ${t.type} ${t.id} failed (${attempt}): ${shown}; ${next}`;
}
