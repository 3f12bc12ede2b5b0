/**
 * Typo protection for settings an operator makes ahead of a queue's first task: such a
 * call is served (pausing a queue before deploying its producers is routine), and when the
 * name is new but within a couple of edits of a queue that exists, the answer names that
 * queue so the CLI and SDK callers can warn "did you mean".
 */
import { editDistance } from "../base/edit-distance.js";

/** Edits (insert, delete, substitute, swap) within which a new name looks like a typo of an existing one. */
const TYPO_EDITS_MAX = 2;

export interface QueueNameFacts {
  /** Whether the queue has a settings row or any task. */
  exists(queue: string): boolean;
  /** Queue names known here: those with rows or tasks, and those workers poll. */
  known(): Iterable<string>;
}

/** The existing queue `queue` is most likely a typo of; "" when `queue` exists or none is near. */
export function similarQueue(queue: string, facts: QueueNameFacts): string {
  if (facts.exists(queue)) return "";
  const known = new Set(facts.known());
  if (known.has(queue)) return ""; // a worker polls it: it exists for the operator
  let best = "";
  let bestEdits = TYPO_EDITS_MAX + 1;
  for (const name of known) {
    // Cheap bound first: names whose lengths differ by more than the budget are never near.
    if (Math.abs(name.length - queue.length) > TYPO_EDITS_MAX) continue;
    const edits = editDistance(queue, name);
    if (edits < bestEdits || (edits === bestEdits && name < best)) [best, bestEdits] = [name, edits];
  }
  return best;
}
