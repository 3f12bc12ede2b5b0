/**
 * The `conveyor` exit codes: the one table of them (docs/cli.md repeats it
 * for users). A script tells "no such task" from "bad flags" from "the node is down"
 * without parsing messages.
 */
import type { ErrorCode } from "../src/base/errors.js";

export const EXIT = {
  OK: 0,
  /** Anything else: an internal error, storage trouble, a limit reached (RESOURCE_EXHAUSTED). */
  FAILURE: 1,
  /** Bad input: a usage error (unknown flag, missing argument, bad value) or the server's INVALID_ARGUMENT. */
  BAD_INPUT: 2,
  /** NOT_FOUND: no such task, limit override, group config or rules. */
  NOT_FOUND: 3,
  /** The node did not answer (cannot connect, deadline passed) or answered UNAVAILABLE: retrying may help. */
  UNREACHABLE: 4,
  /** A conflict with the current state: FAILED_PRECONDITION or ALREADY_EXISTS (e.g. cancelling a finished task). */
  CONFLICT: 5,
  /** Not allowed: no or an unknown token (UNAUTHENTICATED), or a token whose roles or queue scope do not cover the call (PERMISSION_DENIED). */
  NOT_ALLOWED: 6,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

const EXIT_BY_ERROR_CODE: Record<ErrorCode, ExitCode> = {
  INVALID_ARGUMENT: EXIT.BAD_INPUT,
  NOT_FOUND: EXIT.NOT_FOUND,
  ALREADY_EXISTS: EXIT.CONFLICT,
  FAILED_PRECONDITION: EXIT.CONFLICT,
  RESOURCE_EXHAUSTED: EXIT.FAILURE,
  UNAVAILABLE: EXIT.UNREACHABLE,
  INTERNAL: EXIT.FAILURE,
  UNAUTHENTICATED: EXIT.NOT_ALLOWED,
  PERMISSION_DENIED: EXIT.NOT_ALLOWED,
};

/** The exit code of a conveyor error code (an unknown code is a generic failure). */
export function exitCodeOf(code: ErrorCode): ExitCode {
  return EXIT_BY_ERROR_CODE[code] ?? EXIT.FAILURE;
}
