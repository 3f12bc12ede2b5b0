/**
 * A task's lifecycle states: one list shared by the grain (which moves tasks between them),
 * the wire names, and the client SDK (which shows them), so the client package needs
 * nothing of the server's domain. Keep docs/task-states.md in step with this union.
 */
export type TaskState =
  | "scheduled"
  | "pending"
  | "aggregating"
  | "active"
  | "retry"
  | "completed"
  | "archived"
  | "cancelled";
