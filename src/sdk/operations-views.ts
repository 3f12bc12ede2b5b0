/**
 * The node's operational answers in the SDK's shape: the workers it hears from
 * (ListWorkers), its per-minute activity (GetActivity) and the bulk actions' names
 * (BulkTaskAction). Numbers and Dates instead of wire int64s; names instead of enums.
 */
import { ConveyorError } from "../base/errors.js";
import { BulkAction, type GetActivityResponse, type WorkerInfo } from "../gen/conveyor/v1/admin_service_pb.js";

export interface WorkerView {
  workerId: string;
  /** As the worker reports it; "" when it does not say. */
  host: string;
  /** The queues its Lease calls name. */
  queues: string[];
  /** Task types it registered or has batch handlers for. */
  types: string[];
  /** Its total concurrency; undefined when it does not say. */
  concurrency: number | undefined;
  /** Tasks it holds leases on now. */
  inFlight: number;
  lastSeenAt: Date | undefined;
  /** Its first call since it was last gone (or since the node started). */
  connectedSince: Date | undefined;
  /** A Lease call of it is parked: it is idle, waiting for work. */
  polling: boolean;
}

export interface ActivityBucketView {
  startAt: Date;
  enqueued: number;
  completed: number;
  /** Failed attempts that scheduled a retry. */
  retried: number;
  /** Dead-lettered: retries exhausted, refused, expired or archived by an operator. */
  archived: number;
}

/** Per-minute counts of the last hour on the answering node, oldest first; the last bucket is the current, partial minute. */
export interface Activity {
  bucketMs: number;
  buckets: ActivityBucketView[];
}

/** What a bulk action does to every task of a queue in one state. */
export type BulkActionName = "retry" | "archive" | "delete" | "cancel";

const BULK_ACTIONS: Record<BulkActionName, BulkAction> = {
  retry: BulkAction.RETRY, archive: BulkAction.ARCHIVE, delete: BulkAction.DELETE, cancel: BulkAction.CANCEL,
};

/** The wire action of a name; a plain-JS caller's unknown name is refused here, naming the choices. */
export function bulkActionToWire(action: BulkActionName): BulkAction {
  const wire = Object.hasOwn(BULK_ACTIONS, action) ? BULK_ACTIONS[action] : undefined;
  if (wire === undefined) {
    throw new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", `unknown bulk action ${JSON.stringify(action)}; use one of ${Object.keys(BULK_ACTIONS).join(", ")}`, "action");
  }
  return wire;
}

const date = (v: bigint): Date | undefined => (v === 0n ? undefined : new Date(Number(v)));

export function toWorkerView(w: WorkerInfo): WorkerView {
  return {
    workerId: w.workerId, host: w.host, queues: [...w.queues], types: [...w.types], concurrency: w.concurrency || undefined,
    inFlight: w.inFlight, lastSeenAt: date(w.lastSeenAtMs), connectedSince: date(w.connectedSinceMs), polling: w.polling,
  };
}

export function toActivity(r: GetActivityResponse): Activity {
  return {
    bucketMs: Number(r.bucketMs),
    buckets: r.buckets.map((b) => ({
      startAt: new Date(Number(b.startMs)), enqueued: Number(b.enqueued), completed: Number(b.completed),
      retried: Number(b.retried), archived: Number(b.archived),
    })),
  };
}
