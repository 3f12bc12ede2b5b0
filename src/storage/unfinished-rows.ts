/**
 * A queue's unfinished rows for activation (`QueueStore.loadUnfinished`), streamed in
 * arrival (rowid) order and turned into index entries one at a time.
 *
 * Why two statements: a backlog is mostly *plain* pending rows (no group, batch, rules or
 * lease columns set), and activation time is bound by reading them (a million rows: about
 * 7 µs of CPU each as named-column objects, 3.5 as arrays of every column, 2 as arrays of
 * the 17 columns a plain row needs, on the 2-core VM). So plain rows are read with only
 * those columns, every other unfinished row with all of them, and the two streams (each
 * in rowid order: the plain one straight off the (queue, state) index, the other sorted,
 * being few) are merged by rowid, which keeps arrival order without sorting the backlog.
 */
import type { Database as Sqlite, Statement } from "better-sqlite3";
import { indexEntry, type TaskIndexEntry, type TaskState } from "../grains/queue/task.js";
import type { TaskRule } from "../grains/queue/rules.js";

const UNFINISHED = "('pending','scheduled','retry','active','aggregating')";
/** A pending row outside any group or batch, without rules, and with no lease or attempt on it. */
const PLAIN = `state = 'pending' AND grp = '' AND batch_id = '' AND rules = '[]' AND lease_id = '' AND lease_expires_at = 0
  AND attempt_ends_at = 0 AND attempt_started_at = 0 AND attempt_worker = ''`;
const NO_RULES: readonly TaskRule[] = [];

type PlainRow = [rowid: number, id: string, type: string, priority: number, seq: number, concurrencyKey: string, readyAt: number,
  timeoutMs: number, deadlineAt: number, expiresAt: number, uniqueKey: string, uniqueUntil: number, retried: number, maxRetry: number,
  backoffBaseMs: number, backoffMaxMs: number, attemptNumber: number, payloadBytes: number | null];
type OtherRow = [rowid: number, id: string, state: TaskState, type: string, priority: number, seq: number, concurrencyKey: string,
  readyAt: number, timeoutMs: number, deadlineAt: number, expiresAt: number, uniqueKey: string, uniqueUntil: number, retried: number,
  maxRetry: number, backoffBaseMs: number, backoffMaxMs: number, leaseId: string, leaseExpiresAt: number, attemptEndsAt: number,
  attemptStartedAt: number, attemptWorker: string, attemptNumber: number, group: string, batchId: string, rules: string,
  payloadBytes: number | null];

export class UnfinishedRows {
  private readonly plain: Statement;
  private readonly other: Statement;

  constructor(sqlite: Sqlite) {
    this.plain = sqlite.prepare(`SELECT rowid, id, type, priority, seq, concurrency_key, ready_at, timeout_ms, deadline_at, expires_at,
      unique_key, unique_until, retried, max_retry, backoff_base_ms, backoff_max_ms, attempt_number, length(payload)
      FROM tasks WHERE queue = ? AND ${PLAIN} ORDER BY rowid`).raw(true);
    this.other = sqlite.prepare(`SELECT rowid, id, state, type, priority, seq, concurrency_key, ready_at, timeout_ms, deadline_at,
      expires_at, unique_key, unique_until, retried, max_retry, backoff_base_ms, backoff_max_ms, lease_id, lease_expires_at,
      attempt_ends_at, attempt_started_at, attempt_worker, attempt_number, grp, batch_id, rules, length(payload)
      FROM tasks WHERE queue = ? AND state IN ${UNFINISHED} AND NOT (${PLAIN}) ORDER BY rowid`).raw(true);
  }

  /** Every unfinished task of `queue`, in rowid order. */
  *of(queue: string): Iterable<TaskIndexEntry> {
    const plain = this.plain.iterate(queue) as IterableIterator<PlainRow>;
    const other = this.other.iterate(queue) as IterableIterator<OtherRow>;
    let p = plain.next();
    let o = other.next();
    try {
      while (!p.done || !o.done) {
        if (o.done || (!p.done && p.value[0] < o.value[0])) {
          yield plainEntry(p.value);
          p = plain.next();
        } else {
          yield otherEntry(o.value);
          o = other.next();
        }
      }
    } finally {
      // A reader that stops early must not leave the statements busy.
      plain.return?.();
      other.return?.();
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
    maxRetry: r[14], backoffBaseMs: r[15], backoffMaxMs: r[16], group: r[23], rules: JSON.parse(r[25]) as TaskRule[],
  }, {
    state: r[2], seq: r[5], readyAtMs: r[7], expiresAtMs: r[10], uniqueUntilMs: r[12], retried: r[13], leaseId: r[17],
    leaseExpiresAtMs: r[18], attemptEndsAtMs: r[19], attemptStartedAtMs: r[20], attemptWorker: r[21], attemptNumber: r[22],
    batchId: r[24], payloadBytes: r[26] ?? 0,
  });
}
