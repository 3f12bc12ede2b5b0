/**
 * A principal's queue scope: the glob patterns of the queue names it may touch (`queues:`
 * on a token or certificate in the auth file; none = every queue).
 *
 * `*` matches any run of characters, the empty run included; every other character
 * matches itself, case-sensitively. `?` is not a wildcard: queue names cannot contain it,
 * so a pattern holding one was written with a shell's meaning in mind, and the auth file
 * refuses it instead of quietly matching nothing. One wildcard keeps a scope readable at
 * a glance, which is what a reviewer of an auth file needs.
 *
 * Matching walks the name and the pattern (no regular expression: at most name × pattern
 * steps, whatever the pattern), and a name longer than any queue name is never in scope
 * and never walked: the guard checks request fields before the handler has validated them.
 */
import { QUEUE_NAME_MAX_CHARS } from "../../base/limits.js";

/** Queue-name characters, plus `*`. */
const PATTERN = /^[A-Za-z0-9._:*-]+$/;

export class QueueScope {
  constructor(readonly patterns: readonly string[]) {}

  allows(queue: string): boolean {
    return queue.length <= QUEUE_NAME_MAX_CHARS && this.patterns.some((p) => globMatches(p, queue));
  }

  toString(): string {
    return this.patterns.join(", ");
  }
}

/** The scope of an auth-file entry's `queues` value (undefined when absent: every queue); throws naming `at`. */
export function queueScopeOf(value: unknown, at: string): QueueScope | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0) {
    throw new Error(`${at}: queues must be a non-empty list of queue name patterns (leave it out for every queue)`);
  }
  for (const p of value) {
    if (typeof p !== "string" || p.length > QUEUE_NAME_MAX_CHARS || !PATTERN.test(p)) {
      const hint = typeof p === "string" && p.includes("?") ? "; only * is a wildcard" : "";
      throw new Error(`${at}: queue pattern ${JSON.stringify(p)} is not a queue name with * wildcards ` +
        `(1-${QUEUE_NAME_MAX_CHARS} letters, digits, '.', '_', ':', '-' or '*')${hint}`);
    }
  }
  return new QueueScope(value as string[]);
}

/** Whether `text` matches `pattern` (`*` = any run): the two-pointer walk that backs up to the last `*`. */
export function globMatches(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let resume = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] === "*") {
      star = p++;
      resume = t;
    } else if (p < pattern.length && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (star >= 0) {
      // The last `*` takes one more character; retry the rest of the pattern after it.
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === "*") p++;
  return p === pattern.length;
}
