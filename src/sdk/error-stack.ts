/**
 * The stack a failed attempt carries to the node: the thrown error's stack trace, then the
 * first lines of each error in its `cause` chain, cut to ATTEMPT_STACK_MAX_BYTES (the node
 * keeps no more). The head is what says where it came from, so the tail is what is cut.
 */
import { ATTEMPT_STACK_MAX_BYTES, truncateText } from "../base/limits.js";

/** Lines kept of each cause's stack (its message and the first frames). */
const CAUSE_LINES = 5;
/** Causes followed (a cycle of causes ends here too). */
const CAUSES_MAX = 3;

/** "" for a thrown value that is not an Error (it has no stack to show). */
export function stackOf(error: unknown): string {
  if (!(error instanceof Error)) return "";
  const parts = [error.stack ?? `${error.name}: ${error.message}`];
  let cause: unknown = error.cause;
  for (let i = 0; i < CAUSES_MAX && cause !== undefined; i++) {
    const text = cause instanceof Error ? cause.stack ?? `${cause.name}: ${cause.message}` : String(cause);
    parts.push(`Caused by: ${text.split("\n").slice(0, CAUSE_LINES).join("\n")}`);
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return truncateText(parts.join("\n"), ATTEMPT_STACK_MAX_BYTES);
}
