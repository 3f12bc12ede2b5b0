/**
 * Bounds on the work one request can make a node do. The node runs every request on one
 * event loop, so a request that computes for a second stalls every other caller (and
 * the health check) for that second. Each bound below keeps the longest uninterrupted
 * stretch of work a request can cause to a few milliseconds on a small machine; work
 * that may legitimately be larger (a full enqueue batch, compiling a worker's rules) is
 * done in slices that yield to the event loop between them (WORK_SLICE_MS).
 *
 * Beyond a bound a request is refused with INVALID_ARGUMENT naming the field and the
 * maximum (it can never succeed as sent), except where the server can simply do less:
 * a Lease answer holds at most LEASE_RESPONSE_DELIVERIES_MAX deliveries and about
 * LEASE_RESPONSE_MAX_BYTES (the caller asks again for the rest).
 *
 * The numbers were measured on a 2-core VM (ARCHITECTURE.md, "Bounded work per
 * request"); the README's Limits table lists them.
 */

/** The largest request message a node accepts (gRPC; larger: RESOURCE_EXHAUSTED). */
export const REQUEST_MAX_BYTES = 4 * 1024 * 1024;

/** Queues one Lease call may name. */
export const LEASE_QUEUES_MAX = 100;
/** Batch task types one Lease call may name. */
export const LEASE_BATCH_TYPES_MAX = 100;
/** Deliveries in one Lease answer (a call may ask for up to 1000: it gets at most this many per answer). */
export const LEASE_RESPONSE_DELIVERIES_MAX = 100;
/**
 * Payload and result bytes in one Lease answer: the answer stops growing once it holds
 * this much (its first delivery is always sent, however large).
 */
export const LEASE_RESPONSE_MAX_BYTES = 1024 * 1024;

/** Leases one Heartbeat call may carry. */
export const HEARTBEAT_LEASES_MAX = 1000;
/** Settlements one Settle call may carry. */
export const SETTLEMENTS_MAX = 1000;

/** Task types one RegisterTaskTypes call may declare. */
export const REGISTER_TYPES_MAX = 1000;
/** Concurrency rules one RegisterTaskTypes call may carry, over all its types. */
export const REGISTER_RULES_MAX = 256;

/** A concurrency rule's CEL expression (key or max runs), in characters: compiling one is ~linear in its length. */
export const RULE_EXPRESSION_MAX_CHARS = 512;
/** The largest payload a type with concurrency rules may carry: the rules read it as JSON. */
export const RULE_INPUT_MAX_BYTES = 64 * 1024;
/** How deeply the JSON payload read by concurrency rules may nest (arrays and objects). */
export const RULE_INPUT_MAX_DEPTH = 32;
/**
 * Cost units one task's rule evaluation may spend (all rules of its type together). A
 * unit is roughly one element visited: a function call costs 1 plus the size of its
 * arguments (characters of a string, elements of a list or map, counted deeply), a
 * comprehension (all, exists, map, filter, ...) costs the size of its range times the
 * size of its body. Measured worst case at this budget: ~10 ms.
 */
export const RULE_EVAL_COST_MAX = 100_000;
/** A key computed by a concurrency rule, in characters. */
export const RULE_KEY_MAX_CHARS = 256;

/**
 * Work a request does in one event-loop turn before it yields (a full enqueue batch,
 * compiling many rules): the longest stall it causes to other callers.
 */
export const WORK_SLICE_MS = 5;
