/**
 * A queue's unfinished rows for activation (`QueueStore.loadUnfinished`), streamed in
 * arrival (rowid) order and turned into index entries one at a time.
 *
 * Activation time is bound by reading a backlog, which is mostly *plain* pending rows (no
 * group, batch, rules or lease columns set). Measured on the 2-core VM, a million pending
 * rows: about 7 µs of CPU each as named-column objects, 3.5 as arrays of every column, 2.8
 * as arrays of the 17 columns a plain row needs, where most of the cost is better-sqlite3
 * making a JS value of each column of each row. So the pending rows are read in chunks of
 * `PENDING_CHUNK`, each chunk one JSON text that SQLite builds (`json_group_array`) and
 * JSON.parse turns back into arrays: ~1.7 µs a row. A plain row carries only its 17
 * columns, any other pending row all of them (its rules as JSON already). Chunks follow
 * the (queue, state) index in rowid order (`rowid > ?`), so no sort is needed and no chunk
 * is read twice.
 *
 * The other unfinished states (scheduled, retry, active, aggregating) are usually few,
 * and are read by a second statement of every column, sorted by rowid; the two streams
 * are merged by rowid, which keeps arrival order without sorting the backlog.
 *
 * JSON round-trips these values exactly: the integers are what better-sqlite3 would give
 * (doubles), and the strings are ones the node wrote from JS strings (valid UTF-8).
 */
import type { Database as Sqlite, Statement } from "better-sqlite3";
import { FINISHED_STATES, TASK_STATES, indexEntry, type TaskIndexEntry, type TaskState } from "../grains/queue/task.js";
import type { TaskRule } from "../grains/queue/rules.js";

/** Pending rows per chunk: its JSON text is ~1 MB. */
const PENDING_CHUNK = 5_000;
/** The unfinished states but pending (pending rows are read in chunks), as an SQL list; derived, so that no state can be missed. */
const NOT_PENDING = `(${TASK_STATES.filter((s) => !FINISHED_STATES.has(s) && s !== "pending").map((s) => `'${s}'`).join(",")})`;
/** A pending row outside any group or batch, without rules, and with no lease or attempt on it. */
const PLAIN = `grp = '' AND batch_id = '' AND rules = '[]' AND lease_id = '' AND lease_expires_at = 0
  AND attempt_ends_at = 0 AND attempt_started_at = 0 AND attempt_worker = ''`;
const NO_RULES: readonly TaskRule[] = [];

/** The columns of a plain pending row, and of any other unfinished row (OtherRow); `r`: the rowid, `payload_bytes`: the payload's length. */
const PLAIN_COLUMNS = `r, id, type, priority, seq, concurrency_key, ready_at, timeout_ms, deadline_at, expires_at,
  unique_key, unique_until, retried, max_retry, backoff_base_ms, backoff_max_ms, attempt_number, payload_bytes`;
const ALL_COLUMNS = `r, id, state, type, priority, seq, concurrency_key, ready_at, timeout_ms, deadline_at,
  expires_at, unique_key, unique_until, retried, max_retry, backoff_base_ms, backoff_max_ms, lease_id, lease_expires_at,
  attempt_ends_at, attempt_started_at, attempt_worker, attempt_number, grp, batch_id, RULES, payload_bytes`;
/** Every column either list names (the payload's length, never the payload). */
const ROW = `rowid AS r, id, state, type, priority, seq, concurrency_key, ready_at, timeout_ms, deadline_at, expires_at, unique_key,
  unique_until, retried, max_retry, backoff_base_ms, backoff_max_ms, lease_id, lease_expires_at, attempt_ends_at, attempt_started_at,
  attempt_worker, attempt_number, grp, batch_id, rules, length(payload) AS payload_bytes`;

type PlainRow = [rowid: number, id: string, type: string, priority: number, seq: number, concurrencyKey: string, readyAt: number,
  timeoutMs: number, deadlineAt: number, expiresAt: number, uniqueKey: string, uniqueUntil: number, retried: number, maxRetry: number,
  backoffBaseMs: number, backoffMaxMs: number, attemptNumber: number, payloadBytes: number | null];
/** Rules as stored (JSON text) from the row statement, already parsed from a pending chunk. */
type OtherRow = [rowid: number, id: string, state: TaskState, type: string, priority: number, seq: number, concurrencyKey: string,
  readyAt: number, timeoutMs: number, deadlineAt: number, expiresAt: number, uniqueKey: string, uniqueUntil: number, retried: number,
  maxRetry: number, backoffBaseMs: number, backoffMaxMs: number, leaseId: string, leaseExpiresAt: number, attemptEndsAt: number,
  attemptStartedAt: number, attemptWorker: string, attemptNumber: number, group: string, batchId: string, rules: string | TaskRule[],
  payloadBytes: number | null];
const PLAIN_ROW_LENGTH = 18;

export class UnfinishedRows {
  private readonly pending: Statement;
  private readonly other: Statement;

  constructor(sqlite: Sqlite) {
    // One element per row: the plain columns, or (another pending row) all of them, rules as JSON.
    const element = `CASE WHEN ${PLAIN} THEN json_array(${PLAIN_COLUMNS}) ELSE json_array(${ALL_COLUMNS.replace("RULES", "json(rules)")}) END`;
    this.pending = sqlite.prepare(`SELECT json_group_array(${element}), max(r) FROM (SELECT ${ROW} FROM tasks
      WHERE queue = ? AND state = 'pending' AND rowid > ? ORDER BY rowid LIMIT ${PENDING_CHUNK})`).raw(true);
    this.other = sqlite.prepare(`SELECT ${ALL_COLUMNS.replace("RULES", "rules")} FROM (SELECT ${ROW} FROM tasks
      WHERE queue = ? AND state IN ${NOT_PENDING}) ORDER BY r`).raw(true);
  }

  /** Every unfinished task of `queue`, in rowid order. */
  *of(queue: string): Iterable<TaskIndexEntry> {
    const pending = this.pendingRows(queue);
    const other = this.other.iterate(queue) as IterableIterator<OtherRow>;
    let p = pending.next();
    let o = other.next();
    try {
      while (!p.done || !o.done) {
        if (o.done || (!p.done && p.value[0] < o.value[0])) {
          yield p.value.length === PLAIN_ROW_LENGTH ? plainEntry(p.value as PlainRow) : otherEntry(p.value as OtherRow);
          p = pending.next();
        } else {
          yield otherEntry(o.value);
          o = other.next();
        }
      }
    } finally {
      // A reader that stops early must not leave the statement busy.
      other.return?.();
    }
  }

  /** The pending rows of `queue` in rowid order, a chunk at a time (see the header). */
  private *pendingRows(queue: string): IterableIterator<PlainRow | OtherRow> {
    for (let after = 0; ;) {
      const [json, last] = this.pending.get(queue, after) as [string, number | null];
      if (last === null) return;
      const rows = JSON.parse(json) as Array<PlainRow | OtherRow>;
      // The aggregate takes the subquery's rows in its order; checked, since SQL does not promise it.
      for (let i = 1; i < rows.length; i++) {
        if (rows[i]![0] < rows[i - 1]![0]) {
          rows.sort((a, b) => a[0] - b[0]);
          break;
        }
      }
      yield* rows;
      after = last;
    }
  }
}

function plainEntry(r: PlainRow): TaskIndexEntry {
  return indexEntry({
    id: r[1], type: r[2], priority: r[3], concurrencyKey: r[5], timeoutMs: r[7], deadlineAtMs: r[8], uniqueKey: r[10],
    maxRetry: r[13], backoffBaseMs: r[14], backoffMaxMs: r[15], group: "", rules: NO_RULES as TaskRule[],
  }, {
    state: "pending", seq: r[4], readyAtMs: r[6], expiresAtMs: r[9], uniqueUntilMs: r[11], retried: r[12], attemptNumber: r[16],
    payloadBytes: r[17] ?? 0,
  });
}

function otherEntry(r: OtherRow): TaskIndexEntry {
  return indexEntry({
    id: r[1], type: r[3], priority: r[4], concurrencyKey: r[6], timeoutMs: r[8], deadlineAtMs: r[9], uniqueKey: r[11],
    maxRetry: r[14], backoffBaseMs: r[15], backoffMaxMs: r[16], group: r[23], rules: typeof r[25] === "string" ? JSON.parse(r[25]) as TaskRule[] : r[25],
  }, {
    state: r[2], seq: r[5], readyAtMs: r[7], expiresAtMs: r[10], uniqueUntilMs: r[12], retried: r[13], leaseId: r[17],
    leaseExpiresAtMs: r[18], attemptEndsAtMs: r[19], attemptStartedAtMs: r[20], attemptWorker: r[21], attemptNumber: r[22],
    batchId: r[24], payloadBytes: r[26] ?? 0,
  });
}
