/**
 * How a failed command ends: its message on stderr (`error: ...`, or with --json one
 * JSON object `{ code, reason, field?, message }`) and an exit code from exit-codes.ts.
 * Every failure goes through reportFailure, so none is silent.
 */
import { CommanderError } from "commander";
import { ConveyorError } from "../src/base/errors.js";
import { formatDurationMs } from "../src/base/duration.js";
import { EXIT, exitCodeOf, type ExitCode } from "./exit-codes.js";
import type { Io } from "./output.js";

/** Bad input found by a command's action (flags that are fine alone but not together): exit 2, nothing sent. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** Where the failed command was pointed, for messages about reaching it. */
export interface FailureContext {
  server: string;
  timeoutMs: number;
  json: boolean;
}

interface Failure {
  exitCode: ExitCode;
  code: string;
  reason: string;
  field?: string;
  message: string;
}

/** Commander's own messages start with "error: "; ours add it back when printing. */
const withoutPrefix = (text: string) => text.trim().replace(/^error:\s*/, "");

/** Classifies any error thrown by parsing or running a command. */
export function describeFailure(err: unknown, where: FailureContext): Failure {
  if (err instanceof ConveyorError) {
    // UNREACHABLE: the transport failed, not the server. (The server's own UNAVAILABLE
    // errors carry their reason, e.g. GRAIN_DEACTIVATED "queue X was being reloaded;
    // retry", and are printed as the server words them.)
    if (err.reason === "UNREACHABLE") {
      const message = /deadline exceeded/i.test(err.message)
        ? `no answer from conveyor at ${where.server} within ${formatDurationMs(where.timeoutMs)} (see --timeout)`
        : `cannot reach conveyor at ${where.server} (is conveyord running?)`;
      return { exitCode: EXIT.UNREACHABLE, code: err.code, reason: err.reason, message };
    }
    return {
      exitCode: exitCodeOf(err.code), code: err.code, reason: err.reason, message: err.message, ...(err.field ? { field: err.field } : {}),
    };
  }
  if (err instanceof UsageError || err instanceof CommanderError) {
    return { exitCode: EXIT.BAD_INPUT, code: "INVALID_ARGUMENT", reason: "USAGE", message: withoutPrefix(err.message) };
  }
  return { exitCode: EXIT.FAILURE, code: "INTERNAL", reason: "INTERNAL", message: err instanceof Error ? err.message : String(err) };
}

/** Prints the failure on stderr and returns the exit code. */
export function reportFailure(io: Io, err: unknown, where: FailureContext): ExitCode {
  const failure = describeFailure(err, where);
  const { exitCode, ...printed } = failure;
  if (where.json) io.err(`${JSON.stringify(printed)}\n`);
  else io.err(`error: ${failure.message}\n`);
  return exitCode;
}
