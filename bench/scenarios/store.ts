/**
 * SQLite cost per task on the grain's store path, in process (no gRPC, no worker): the
 * real runtime (GrainHost, QueueGrain, QueueCore, TaskStore) on a real data file, with
 * the group commit as the node runs it (a transaction per event-loop turn, awaited).
 * Each phase of a task's life is measured apart, as this process's CPU time (user +
 * system, process.cpuUsage) per task, so a busy neighbour inflates it less than wall time:
 *   enqueue   the enqueue turn (insert), its commit;
 *   activate  the lease turn (pending → active, the delivery's rows), its commit;
 *   complete  the settle turn (completed, its attempt row), its commit.
 * Two shapes of a transaction:
 *   batch     4 queues, one turn of 64 tasks each per transaction (a bulk producer, a
 *             worker leasing many; 3 of the 4 turns pay a savepoint);
 *   single    one queue, 16 turns of one task per transaction (many callers, one task each).
 * The core's own CPU is inside these numbers too; compare two builds in the same sitting.
 * Each phase also reports its commit's share (CPU from the end of its turns to the commit's
 * answer). BENCH_STORE_PRAGMA="a=1;b=2" sets pragmas on the file first, for experiments.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { systemClock } from "../../src/base/clock.js";
import { mintTaskId } from "../../src/cluster/task-ids.js";
import { seededRandom } from "../../src/base/random.js";
import type { NewTask } from "../../src/grains/queue/task.js";
import { GrainHost } from "../../src/grains/runtime/grain-host.js";
import { SharedSlotLedger } from "../../src/grains/runtime/shared-slots.js";
import { openDataDir } from "../../src/storage/data-dir.js";
import { TaskStore } from "../../src/storage/task-store.js";
import { payloadOf } from "../payload.js";
import { removeDir, trackDir } from "../processes.js";
import type { ResultRow, Scenario } from "../scenario.js";

const PHASES = ["enqueue", "activate", "complete"] as const;
type Phase = (typeof PHASES)[number];

interface Shape {
  name: string;
  queues: number;
  turnsPerTransaction: number;
  tasksPerTurn: number;
}

const SHAPES: Shape[] = [
  { name: "batch", queues: 4, turnsPerTransaction: 4, tasksPerTurn: 64 },
  { name: "single", queues: 1, turnsPerTransaction: 16, tasksPerTurn: 1 },
];
const ROUNDS = 20;
const RESULT = new TextEncoder().encode('{"ok":true}');

export const storeScenario: Scenario = {
  name: "store",
  description: "CPU per task of the grain's store path (enqueue, activate, complete), in process on a real file",
  async run(ctx) {
    const rows: ResultRow[] = [];
    for (const shape of SHAPES) {
      const dir = mkdtempSync(join(tmpdir(), `conveyor-bench-store-${shape.name}-`));
      trackDir(dir);
      const dataDir = openDataDir({ dir, synchronous: "normal" });
      for (const pragma of (process.env.BENCH_STORE_PRAGMA ?? "").split(";").filter(Boolean)) dataDir.db.sqlite.pragma(pragma);
      const store = new TaskStore(dataDir.db, { deadRetentionMs: 7 * 86_400_000 });
      const host = new GrainHost({
        store, clock: systemClock, random: seededRandom(7), newId: randomUUID,
        core: { leaseTtlMs: 60_000, groupDefaults: { maxSize: 100, maxDelayMs: 60_000, graceMs: 10_000 } },
        idleMs: 3_600_000, logger: pino({ level: "silent" }), sharedSlots: new SharedSlotLedger(), hooks: { onEvents: () => undefined },
      });
      host.link({ onReady: () => undefined, isPinned: () => false, onReminder: () => undefined });
      host.start();
      try {
        const micros = new Map<Phase, number>(PHASES.map((p) => [p, 0]));
        /** The part of each phase spent from the end of its turns to its commit's answer (the COMMIT, mostly). */
        const commits = new Map<Phase, number>(PHASES.map((p) => [p, 0]));
        const perTransaction = shape.turnsPerTransaction * shape.tasksPerTurn;
        const transactions = Math.max(1, Math.floor(ctx.options.tasks / ROUNDS / perTransaction));
        let seq = 0;
        for (let round = 0; round < ROUNDS; round++) {
          for (let t = 0; t < transactions; t++) {
            const turns = Array.from({ length: shape.turnsPerTransaction }, (_, i) => {
              const queue = `q${i % shape.queues}`;
              return { queue, tasks: Array.from({ length: shape.tasksPerTurn }, () => benchNewTask(queue, ++seq)) };
            });
            const leases: Array<Array<{ leaseId: string; taskId: string }>> = [];
            await measure(micros, commits, "enqueue", dataDir.db, () => {
              for (const turn of turns) host.get(turn.queue).enqueue(turn.tasks, false);
            });
            await measure(micros, commits, "activate", dataDir.db, () => {
              for (const turn of turns) {
                const deliveries = host.get(turn.queue).lease(turn.tasks.length);
                leases.push(deliveries.map((d) => ({ leaseId: d.leaseId, taskId: d.tasks[0]!.id })));
              }
            });
            await measure(micros, commits, "complete", dataDir.db, () => {
              turns.forEach((turn, i) => host.get(turn.queue).settle(leases[i]!.map((l) => ({ ...l, outcome: "success", result: RESULT }))));
            });
            if (leases.flat().length !== perTransaction) throw new Error(`store: leased ${leases.flat().length} of ${perTransaction}`);
          }
          ctx.progress(`store ${shape.name}: round ${round + 1}/${ROUNDS}`);
        }
        const tasks = seq;
        const us = (p: Phase) => micros.get(p)! / tasks;
        const commitUs = (p: Phase) => commits.get(p)! / tasks;
        const total = PHASES.reduce((sum, p) => sum + us(p), 0);
        rows.push({
          scenario: `store ${shape.name}`, tasks, seconds: total * tasks / 1e6 /* CPU seconds */, tasksPerSec: 1e6 / total,
          notes: `${total.toFixed(1)} µs CPU/task: ${PHASES.map((p) => `${p} ${us(p).toFixed(1)} (commit ${commitUs(p).toFixed(1)})`).join(", ")} ` +
            `(${shape.turnsPerTransaction} turns × ${shape.tasksPerTurn} per transaction)`,
          details: Object.fromEntries([
            ...PHASES.map((p) => [`${p}Micros`, us(p)]), ...PHASES.map((p) => [`${p}CommitMicros`, commitUs(p)]), ["totalMicros", total],
          ]),
        });
      } finally {
        host.stop();
        dataDir.close();
        removeDir(dir);
      }
    }
    return rows;
  },
};

/** Runs one transaction's turns and awaits its commit, adding its CPU time to `phase`. */
async function measure(micros: Map<Phase, number>, commits: Map<Phase, number>, phase: Phase, db: { committed(): Promise<void> },
  turns: () => void): Promise<void> {
  const t0 = process.cpuUsage();
  turns();
  const t1 = process.cpuUsage();
  await db.committed();
  const all = process.cpuUsage(t0);
  const commit = process.cpuUsage(t1);
  micros.set(phase, micros.get(phase)! + all.user + all.system);
  commits.set(phase, commits.get(phase)! + commit.user + commit.system);
}

/** A plain task of the benchmark's shape (~110-byte JSON payload), its id minted as the server mints one. */
function benchNewTask(queue: string, i: number): NewTask {
  return {
    id: mintTaskId(0, Date.now()), idChosen: false, queue, type: "bench:task",
    payload: Buffer.from(JSON.stringify(payloadOf(i))), contentType: "application/json", metadata: {},
    priority: 4, maxRetry: 25, timeoutMs: 0, deadlineAtMs: 0, processAtMs: 0, uniqueKey: "", uniqueTtlMs: 0,
    retentionMs: 86_400_000, expiresAtMs: 0, concurrencyKey: "", group: "", backoffBaseMs: 1_000, backoffMaxMs: 60_000,
    rules: [], ruleError: "",
  };
}
