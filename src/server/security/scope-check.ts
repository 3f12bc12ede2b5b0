/**
 * Holds a scoped identity to its queues, from the `queues` column of the RPC table, before
 * the handler runs (so a refused call changes nothing):
 *
 * - a queue the request names outside the scope: PERMISSION_DENIED naming the queue and
 *   the identity (never the token);
 * - a task addressed by id whose queue is outside the scope: NOT_FOUND, word for word what
 *   an unknown id gets. PERMISSION_DENIED would confirm that the id exists in another
 *   team's queue; a scope is meant to make those queues invisible, not forbidden-but-seen.
 *   The refusal is still logged and counted on the node like every other one;
 * - a request about every queue: its answer cut to the scope when the table says how,
 *   otherwise PERMISSION_DENIED (it needs an unscoped identity).
 */
import { ConveyorError, taskNotFound } from "../../base/errors.js";
import { QUEUE_NAME_MAX_CHARS, quote, truncateText } from "../../base/limits.js";
import type { Identity } from "./identity.js";
import type { QueueAccess } from "./queue-access.js";

/** The reason refusals by scope are logged and counted with. */
export const SCOPE_REFUSAL = "QUEUE_NOT_IN_SCOPE";

export type ScopeVerdict =
  | { ok: true; narrow?: (response: unknown) => unknown }
  /** `queue`: the queue outside the scope, for the node's log (a task's, too: the log is not the caller's). */
  | { ok: false; error: ConveyorError; queue?: string };

export function scopeVerdict(
  rpc: string, access: QueueAccess, identity: Identity, request: unknown, queueOfTask: (id: string) => string | undefined,
): ScopeVerdict {
  const scope = identity.scope;
  if (!scope) return { ok: true };
  const touch = access.touches(request);
  const who = `${identity.name} (queues: ${scope})`;
  switch (touch.kind) {
    case "none":
      return { ok: true };
    case "queues": {
      const outside = touch.queues.find((q) => !scope.allows(q));
      if (outside === undefined) return { ok: true };
      return {
        // Cut short for the log: the name came from the request, unvalidated.
        ok: false, queue: truncateText(outside, QUEUE_NAME_MAX_CHARS),
        error: new ConveyorError("PERMISSION_DENIED", SCOPE_REFUSAL, `${who} may not touch queue ${quote(outside)} (${rpc})`,
          undefined, { details: { queue: outside } }),
      };
    }
    case "task": {
      // An unknown id goes on to the handler, which answers NOT_FOUND as it always has.
      const queue = queueOfTask(touch.id);
      return queue === undefined || scope.allows(queue) ? { ok: true } : { ok: false, queue, error: taskNotFound(touch.id) };
    }
    case "every": {
      const narrow = access.narrow;
      if (narrow) return { ok: true, narrow: (response) => narrow(response, (q) => scope.allows(q)) };
      return {
        ok: false,
        error: new ConveyorError("PERMISSION_DENIED", SCOPE_REFUSAL,
          `${who} may not call ${rpc} for every queue: name a queue in its scope, or use an identity without queue scopes`),
      };
    }
  }
}
