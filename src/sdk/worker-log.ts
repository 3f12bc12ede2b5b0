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
