/**
 * Every limit on what a request may carry, in one list (docs/reference/limits.md, generated
 * from this file, lists them). Server validation imports these; nothing else defines a
 * maximum of its own. Units are in the names.
 *
 * How the time bounds are chosen: every instant the engine stores or sends is an
 * integer of milliseconds since the epoch, computed as an instant plus a few durations
 * (now + timeout, now + backoff, finished + retention, first member + max delay, ...).
 * A caller's instant is at most INSTANT_MAX_MS (the last millisecond of year 9999) and a
 * caller's duration at most DURATION_MAX_MS (100 years), so any derived instant is below
 * INSTANT_MAX_MS + 4 × DURATION_MAX_MS ≈ 2.7e14: far inside Number.MAX_SAFE_INTEGER
 * (9.0e15), an int64, SQLite's INTEGER and a JavaScript Date (±8.64e15). The bounds
 * themselves are generous for any real schedule; they exist so that no value can
 * overflow later, when `now` is added.
 */

// ---------------------------------------------------------------------------------
// Time

/** 9999-12-31T23:59:59.999Z: the latest instant a request may name. */
export const INSTANT_MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/** 100 years of 365.25 days: the longest duration a request (or the config) may name. */
export const DURATION_MAX_MS = 100 * 365.25 * 86_400_000;
/**
 * Node's setTimeout limit (2^31 - 1 ms, about 24.8 days): the most a node setting that
 * is used directly as a timer (lease_ttl, lease_wait_max, janitor_interval, ...) may be.
 */
export const TIMER_MAX_MS = 2 ** 31 - 1;

// ---------------------------------------------------------------------------------
// Rates

/** The slowest rate limit: one task per ~11.6 days (the wait for a token stays a sane duration). */
export const RATE_MIN_PER_SEC = 1e-6;
/** The fastest rate limit: beyond it, use no limit. */
export const RATE_MAX_PER_SEC = 1_000_000;
/** The largest rate-limit burst. */
export const RATE_BURST_MAX = 1_000_000;

// ---------------------------------------------------------------------------------
// Strings (lengths in characters, i.e. UTF-16 code units, unless the name says bytes)

/** Task ids (caller-chosen ones also use only letters, digits and . _ : @ / -). */
export const TASK_ID_MAX_CHARS = 128;
/** Queue names (letters, digits and . _ : -). */
export const QUEUE_NAME_MAX_CHARS = 128;
/** Task types, unique keys, concurrency keys and groups: the names a caller picks. */
export const KEY_MAX_CHARS = 256;
/** A payload's content type. */
export const CONTENT_TYPE_MAX_CHARS = 256;
/** Worker ids (the SDK's default is host:pid:random). */
export const WORKER_ID_MAX_CHARS = 256;
/** Lease ids (the node hands out UUIDs; a longer one cannot be held). */
export const LEASE_ID_MAX_CHARS = 128;
/** Page tokens of ListTasks (a row number: at most 16 digits, a safe integer). */
export const PAGE_TOKEN_MAX_CHARS = 16;
/** Names of concurrency rules (letters, digits and . _ : -). */
export const RULE_NAME_MAX_CHARS = 128;

// ---------------------------------------------------------------------------------
// Sizes

/** A task's payload. */
export const PAYLOAD_MAX_BYTES = 1024 * 1024;
/** Metadata: entries per task. */
export const METADATA_ENTRIES_MAX = 64;
/** Metadata: one key, in UTF-8 bytes. */
export const METADATA_KEY_MAX_BYTES = 256;
/** Metadata: one value, in UTF-8 bytes. */
export const METADATA_VALUE_MAX_BYTES = 4096;
/** Metadata: all keys and values of a task together, in UTF-8 bytes. */
export const METADATA_MAX_BYTES = 16 * 1024;
/** A handler's result (Settle): a longer one is stored truncated, with a marker. */
export const RESULT_MAX_BYTES = 1024 * 1024;
/** A failed attempt's error message (Settle): a longer one is stored truncated, with a marker. */
export const ERROR_MESSAGE_MAX_BYTES = 64 * 1024;
/** A task's error text in one log line (a failure, see server/task-failure-log.ts): the rest is in `task get`. */
export const LOG_ERROR_TEXT_MAX_BYTES = 2 * 1024;
/**
 * The most a whole task can weigh as stored and delivered: every field is bounded, so
 * this is their sum (payload, metadata, result, error, the named strings, and 1 KiB for
 * the numbers and framing). It stays well below gRPC's default 4 MiB message limit, so
 * any task can be read by any client.
 */
export const TASK_MAX_BYTES = PAYLOAD_MAX_BYTES + METADATA_MAX_BYTES + RESULT_MAX_BYTES + ERROR_MESSAGE_MAX_BYTES
  + 3 * (TASK_ID_MAX_CHARS + LEASE_ID_MAX_CHARS + QUEUE_NAME_MAX_CHARS + 4 * KEY_MAX_CHARS + CONTENT_TYPE_MAX_CHARS) + 1024;

/** The largest gRPC message a node or client accepts (a Lease response carries many tasks). */
export const GRPC_MESSAGE_MAX_BYTES = 64 * 1024 * 1024;
/** The largest JSON API request body (a 1 MiB payload is ~1.4 MiB in base64). */
export const JSON_API_BODY_MAX_BYTES = 2 * 1024 * 1024;

// ---------------------------------------------------------------------------------
// Counts

/** Tasks per EnqueueBatch / EnqueueTx, deliveries per Lease (the SDK's enqueue batches too). */
export const BATCH_MAX = 1000;
/** Tasks per ListTasks page. */
export const PAGE_SIZE_MAX = 1000;
/** Concurrency rules per task type. */
export const RULES_PER_TYPE_MAX = 16;
/** Members of a group (a fired group is one delivery). */
export const GROUP_SIZE_MAX = BATCH_MAX;
/** Schedules per queue (each is held in its grain's memory, payload included). */
export const SCHEDULES_PER_QUEUE_MAX = 100;
/** A schedule's payload (kept in its grain's memory; the task limit is PAYLOAD_MAX_BYTES). */
export const SCHEDULE_PAYLOAD_MAX_BYTES = 64 * 1024;
/** A schedule's name (it is part of its tasks' ids: "schedule:<name>:<tick ms>"). */
export const SCHEDULE_NAME_MAX_CHARS = 64;
/** A cron expression. */
export const CRON_EXPRESSION_MAX_CHARS = 256;
/** The shortest fixed interval between ticks. */
export const SCHEDULE_INTERVAL_MIN_MS = 1_000;

// ---------------------------------------------------------------------------------
// Work per request
//
// Bounds on the work one request can make a node do. The node runs every request on one
// event loop, so a request that computes for a second stalls every other caller (and
// the health check) for that second. Each bound below keeps the longest uninterrupted
// stretch of work a request can cause to a few milliseconds on a small machine; work
// that may legitimately be larger (a full enqueue batch, compiling a worker's rules) is
// done in slices that yield to the event loop between them (WORK_SLICE_MS).
//
// Beyond a bound a request is refused with INVALID_ARGUMENT naming the field and the
// maximum (it can never succeed as sent), except where the server can simply do less:
// a Lease answer holds at most LEASE_RESPONSE_DELIVERIES_MAX deliveries and about
// LEASE_RESPONSE_MAX_BYTES (the caller asks again for the rest).
//
// The numbers were measured on a 2-core VM (docs/decisions/0018-bounded-work-per-
// request.md); docs/reference/limits.md lists them.

/** The largest request message a node accepts (gRPC; larger: RESOURCE_EXHAUSTED). */
export const REQUEST_MAX_BYTES = 4 * 1024 * 1024;

/**
 * How deep a request may nest: protobuf messages within messages (gRPC) and arrays or
 * objects within each other (the JSON API's body). Checked in one linear pass before the
 * real decoder runs, so a body of a million open brackets costs a scan, not a parse. No
 * conveyor request nests more than a few levels; protobuf's own default is 100.
 */
export const REQUEST_NESTING_MAX_DEPTH = 32;

/**
 * Queues one Lease call may name, and distinct queues one Heartbeat or Settle call may
 * touch (a worker's leases come from the queues it leases from). A queue's first call
 * activates its grain (a few queries and some memory).
 */
export const LEASE_QUEUES_MAX = 100;
/** Minutes of per-minute activity counts a node keeps for the dashboard's charts (GetActivity). */
export const ACTIVITY_MINUTES = 60;
/** A worker's host name as it reports it in Lease calls. */
export const WORKER_HOST_MAX_CHARS = 256;
/**
 * A worker that has made no call (Lease, Heartbeat, Settle) for this long and has no
 * Lease call parked is gone: ListWorkers no longer shows it and its leases' holder is
 * forgotten. A busy worker heartbeats (every `heartbeat_interval`, at most lease_ttl / 3)
 * and an idle one keeps a Lease call parked, so a live worker is never this quiet unless
 * its heartbeat interval is longer: the node then waits two heartbeat intervals instead.
 */
export const WORKER_GONE_AFTER_MS = 60_000;
/** Batch task types one Lease call may name. */
export const LEASE_BATCH_TYPES_MAX = 100;
/** Task types a Lease call may restrict itself to (`types`): as many as a worker may register. */
export const LEASE_TYPES_MAX = 1000;
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
 * Tasks one grain turn of a bulk action (BulkTaskAction, DeleteQueue) acts on; the grain
 * serves other calls (leases, enqueues) between turns. A retry batch also stops at
 * WORK_SLICE_BYTES of payload, since reviving a task rewrites its row.
 */
export const BULK_ACTION_BATCH_MAX_TASKS = 500;
/** Attempts kept per task (the oldest are dropped beyond it): what GetTask answers with. */
export const ATTEMPTS_KEPT_PER_TASK = 25;
/** An attempt's error as kept in its history (the task's last_error keeps the whole message). */
export const ATTEMPT_ERROR_MAX_BYTES = 4 * 1024;
/**
 * A failed attempt's stack trace (with the first lines of its cause chain) as the SDKs send
 * it and the attempt history keeps it: enough for a dozen frames and two causes, while 25
 * kept attempts of a task stay within 200 KiB. The SDKs cut to it too, so the wire never
 * carries more.
 */
export const ATTEMPT_STACK_MAX_BYTES = 4 * 1024;

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

// ---------------------------------------------------------------------------------
// Connections and waits (SDK and node)

/**
 * The longest pause between two connection attempts to a node (gRPC's reconnect
 * backoff, and the SDK's own retry loops). grpc-js grows its backoff to 120 s by
 * default, so a long outage meant a long wait after the node came back; capped here, a
 * producer or worker resumes within about this long of the node's return.
 */
export const RECONNECT_BACKOFF_MAX_MS = 500;
/** The first pause after a failed connection attempt. */
export const RECONNECT_BACKOFF_INITIAL_MS = 100;
/** How long a Client call waits for an unreachable node before failing (Client `connectTimeoutMs`). */
export const CONNECT_TIMEOUT_MS_DEFAULT = 10_000;
/** How long a stopping Worker lets running handlers finish before releasing them (`shutdownTimeoutMs`). */
export const SHUTDOWN_TIMEOUT_MS_DEFAULT = 10_000;
/**
 * How long a stopping Worker keeps trying to hand its last outcomes to an unreachable
 * node before it gives up (those leases lapse and the node retries the tasks).
 */
export const STOP_SETTLE_WAIT_MS = 5_000;
/** How often a Worker that cannot reach its node says so again in its log. */
export const WAITING_LOG_INTERVAL_MS = 10_000;
/** The longest wait one WaitTask call may ask for (the SDK loops for longer waits). */
export const WAIT_TASK_MAX_MS = 5 * 60_000;
/** WaitTask calls a node holds at once; beyond it a call is refused with WAITERS_FULL. */
export const TASK_WAITERS_MAX = 10_000;

// Security (src/server/security)

/** Random bytes in a token `conveyord token new` makes: 256 bits, beyond any search of its hash. */
export const TOKEN_RANDOM_BYTES = 32;
/** An Authorization value longer than this is refused unread (no token is near it). */
export const AUTHORIZATION_MAX_CHARS = 1024;
/** The audit line's copy of an admin request is cut to this (admin requests carry no payloads). */
export const AUDIT_REQUEST_MAX_BYTES = 2048;

// ---------------------------------------------------------------------------------
// Messages

/** How much of a caller's value an error message quotes. */
export const QUOTE_MAX_CHARS = 64;
/** The longest error message sent in a status (it travels as an HTTP/2 header). */
export const STATUS_MESSAGE_MAX_BYTES = 1024;

/**
 * A caller's value for an error message: JSON-quoted, cut to its first
 * QUOTE_MAX_CHARS characters with "…" and its length when it is longer.
 */
export function quote(value: string, maxChars = QUOTE_MAX_CHARS): string {
  if (value.length <= maxChars) return JSON.stringify(value);
  return `${JSON.stringify(cutChars(value, maxChars))}… (${value.length} characters)`;
}

/** The first `n` UTF-16 code units of `text`, never splitting a surrogate pair. */
function cutChars(text: string, n: number): string {
  const code = text.charCodeAt(n - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? n - 1 : n);
}

/** "512 bytes", "12 KiB", "28.6 MiB". */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${+(n / 1024).toFixed(1)} KiB`;
  return `${+(n / (1024 * 1024)).toFixed(1)} MiB`;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The UTF-8 size of `text`. */
export const utf8Bytes = (text: string): number => Buffer.byteLength(text, "utf8");

/**
 * `text` cut so that its UTF-8 form, with a "…[truncated N KiB]" marker, fits in
 * `maxBytes`; unchanged when it already fits. Never splits a character.
 */
export function truncateText(text: string, maxBytes: number): string {
  const size = utf8Bytes(text);
  if (size <= maxBytes) return text;
  const bytes = encoder.encode(text);
  const kept = keepBytes(size, maxBytes);
  let end = kept;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // back to a character start
  return decoder.decode(bytes.subarray(0, end)) + marker(size - end);
}

/** Bytes cut the same way (the marker is appended as UTF-8 text). */
export function truncateBytes(bytes: Uint8Array, maxBytes: number): Uint8Array {
  if (bytes.byteLength <= maxBytes) return bytes;
  const kept = keepBytes(bytes.byteLength, maxBytes);
  const tail = encoder.encode(marker(bytes.byteLength - kept));
  const out = new Uint8Array(kept + tail.byteLength);
  out.set(bytes.subarray(0, kept));
  out.set(tail, kept);
  return out;
}

const marker = (droppedBytes: number) => `…[truncated ${formatBytes(droppedBytes)}]`;

/**
 * How many bytes of a `size`-byte value to keep: room is left for the marker, which is
 * at most 28 bytes ("…" is 3, "[truncated 9999999.9 MiB]" 25) for any value under 10 TiB.
 */
function keepBytes(size: number, maxBytes: number): number {
  return Math.max(0, Math.min(size, maxBytes - MARKER_MAX_BYTES));
}

const MARKER_MAX_BYTES = 32;
