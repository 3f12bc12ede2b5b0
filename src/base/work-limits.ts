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

/**
 * Queues one Lease call may name, and distinct queues one Heartbeat or Settle call may
 * touch (a worker's leases come from the queues it leases from). A queue's first call
 * activates its grain (a few queries and some memory).
 */
export const LEASE_QUEUES_MAX = 100;
/** Batch task types one Lease call may name. */
export const LEASE_BATCH_TYPES_MAX = 100;
/** Deliveries in one Lease answer (a call may ask for up to 1000: it gets at most this many per answer). */
export const LEASE_RESPONSE_DELIVERIES_MAX = 100;
/**
 * Payload bytes in one Lease answer: the answer stops growing once it holds this much
 * (its first delivery is always sent, however large). Every delivered task's row is
 * rewritten (and committed) when it turns active, at ~25 ms per MiB on the measured VM.
 */
export const LEASE_RESPONSE_MAX_BYTES = 256 * 1024;

/** Leases one Heartbeat call may carry. */
export const HEARTBEAT_LEASES_MAX = 1000;
/** Settlements one Settle call may carry. */
export const SETTLEMENTS_MAX = 1000;
/**
 * Payload bytes one EnqueueTx may carry: it is atomic (one grain turn, one transaction),
 * so it cannot be sliced; this keeps it no heavier than one Enqueue of the largest payload.
 */
export const ENQUEUE_TX_MAX_BYTES = 1024 * 1024;

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
 * comprehension (all, exists, map, filter, ...) the size of its range times the size of
 * its body (src/server/rules/cel-meter.ts has the details). Typical rules cost tens of
 * units (`input.user_id`: 12; an `exists` over 100 short strings: ~2,800). Measured
 * on a busy 2-core VM: 20-170 ns per unit once the evaluator is JIT-compiled (so about
 * 1-4 ms at this budget), several times more for a fresh node's first evaluations.
 */
export const RULE_EVAL_COST_MAX = 20_000;
/** A key computed by a concurrency rule, in characters. */
export const RULE_KEY_MAX_CHARS = 256;

/**
 * Work a request does in one event-loop turn before it yields (a full enqueue batch,
 * compiling many rules): the longest stall it causes to other callers.
 */
export const WORK_SLICE_MS = 5;
/**
 * Row bytes a sliced request writes in one turn before it yields: the turn's commit
 * writes them to the WAL, at ~25 ms per MiB on the measured VM.
 */
export const WORK_SLICE_BYTES = 256 * 1024;
