/**
 * Read-only views of a queue's core for the shell, the dashboard and tests.
 *
 * Why a file of its own: views copy what they return, so a caller can never mutate the
 * core's memory through one; keeping them apart from the parts that mutate makes that
 * easy to check.
 */
import type { CoreMemory } from "./core-memory.js";
import type { KeySlots } from "./key-slots.js";
import type { TaskIndexEntry } from "./task.js";

export interface CoreStats {
  unfinished: number;
  leases: number;
  inflightKeyed: number;
  held: number;
  timers: number;
}

/** Unfinished tasks in memory, copies (for tests and the rebuild check). */
export function snapshotOf(memory: CoreMemory): TaskIndexEntry[] {
  return memory.entries.snapshot();
}

export function statsOf(memory: CoreMemory, slots: KeySlots): CoreStats {
  return {
    unfinished: memory.entries.size, leases: memory.leases.size, inflightKeyed: slots.inflightTotal(),
    held: slots.heldTotal(), timers: memory.due.size,
  };
}
