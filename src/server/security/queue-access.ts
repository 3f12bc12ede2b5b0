/**
 * Which queues a request touches: the `queues` column of the RPC table (roles.ts), read by
 * the guard to hold a scoped identity to its queues without any service knowing about
 * scopes. Every RPC is one of:
 *
 * - `named`: the request names its queues in fields (a task spec's queue, a Lease's queue
 *   list, an admin action's queue);
 * - `byTaskId`: the request names a task, whose queue the guard looks up;
 * - `everyQueue`: the request is about every queue; with `narrow` the answer is cut to the
 *   caller's scope, without it only an unscoped identity may call it;
 * - `namedOrEvery`: an optional queue filter: named when given, every queue when empty;
 * - `nodeWide`: it touches no queue's tasks or settings (cluster membership, task types).
 *
 * `fields` says in words what is read, for the docs and for a reviewer of a new row.
 */

/** What one request touches. */
export type Touch =
  | { kind: "queues"; queues: readonly string[] }
  | { kind: "task"; id: string }
  | { kind: "every" }
  | { kind: "none" };

export type Narrow = (response: unknown, allows: (queue: string) => boolean) => unknown;

export interface QueueAccess {
  readonly kind: "named" | "byTaskId" | "everyQueue" | "namedOrEvery" | "nodeWide";
  /** The request fields read (or, for nodeWide, why none are). */
  readonly fields: string;
  touches(request: unknown): Touch;
  /** Cuts an every-queue answer to what `allows` admits; absent: such a call needs an unscoped identity. */
  readonly narrow?: Narrow;
}

/** The queue a task spec (or a schedule's) names: empty means "default", as validation reads it. */
export const specQueue = (spec: { queue: string } | undefined, fallback: string): string[] =>
  spec ? [spec.queue === "" ? fallback : spec.queue] : [];

export function named<Req>(fields: string, of: (request: Req) => readonly string[]): QueueAccess {
  return { kind: "named", fields, touches: (r) => ({ kind: "queues", queues: of(r as Req) }) };
}

export function byTaskId(): QueueAccess {
  return { kind: "byTaskId", fields: "id (the task's queue)", touches: (r) => ({ kind: "task", id: (r as { id: string }).id }) };
}

export function everyQueue<Res>(narrow?: (response: Res, allows: (queue: string) => boolean) => Res): QueueAccess {
  return {
    kind: "everyQueue", fields: narrow ? "every queue; the answer is cut to the scope" : "every queue; needs an unscoped identity",
    touches: () => ({ kind: "every" }), ...(narrow ? { narrow: narrow as Narrow } : {}),
  };
}

export function namedOrEvery<Req, Res>(
  field: string, of: (request: Req) => string, narrow?: (response: Res, allows: (queue: string) => boolean) => Res,
): QueueAccess {
  return {
    kind: "namedOrEvery", fields: `${field}; empty: ${everyQueue(narrow).fields}`,
    touches: (r) => {
      const queue = of(r as Req);
      return queue === "" ? { kind: "every" } : { kind: "queues", queues: [queue] };
    },
    ...(narrow ? { narrow: narrow as Narrow } : {}),
  };
}

export function nodeWide(why: string): QueueAccess {
  return { kind: "nodeWide", fields: why, touches: () => ({ kind: "none" }) };
}

/** `items` whose queue (read by `queueOf`) is allowed. */
export const within = <T>(items: readonly T[], queueOf: (item: T) => string, allows: (queue: string) => boolean): T[] =>
  items.filter((item) => allows(queueOf(item)));
