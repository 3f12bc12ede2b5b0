/**
 * Bulk actions: one operator action on every task of a queue in one state, which pairs
 * are allowed, and how the shell runs one batch of them.
 *
 * Why the pairs are a table: they mirror the single-task actions (OperatorActions and
 * the shell's handling of finished tasks) — retry only finished-by-failure tasks
 * (archived, cancelled), archive only waiting ones, cancel any unfinished one, delete
 * anything but a running task — so a bulk action never does what the same action on one
 * task would refuse.
 */
import type { TaskState } from "./task.js";

export type BulkAction = "retry" | "archive" | "delete" | "cancel";

/** The states each bulk action applies to (the single-task action's own). */
export const BULK_ACTION_STATES: Readonly<Record<BulkAction, readonly TaskState[]>> = {
  retry: ["archived", "cancelled"],
  archive: ["scheduled", "pending", "retry", "aggregating"],
  cancel: ["scheduled", "pending", "aggregating", "active", "retry"],
  delete: ["scheduled", "pending", "aggregating", "retry", "completed", "archived", "cancelled"],
};

/** One batch over finished tasks (read from storage in rowid order). */
export interface FinishedBatch {
  affected: number;
  /** The last row the batch looked at: the next batch starts after it. */
  lastRowid: number;
  /** False once the batch found fewer rows than it asked for. */
  more: boolean;
}
