/**
 * Memory per unfinished task of the queue core itself (bench/core-footprint.ts, in a
 * child process with --expose-gc): `--pending-tasks` plain pending tasks (at most
 * 1,000,000), packed and as entry objects (the representation before packing), arriving
 * as activation reads them and as enqueues with server-minted ids. Exact where the node's
 * RSS is not (no gRPC, SQLite or allocator in it), and quick.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "../daemon.js";
import type { ResultRow, Scenario } from "../scenario.js";

const SCRIPT = join(REPO_ROOT, "dist/bench/core-footprint.js");
const MAX_TASKS = 1_000_000;

export const footprintScenario: Scenario = {
  name: "footprint",
  description: "bytes per unfinished task in the queue core: packed vs entry objects, loaded vs enqueued",
  async run(ctx) {
    const n = Math.min(MAX_TASKS, ctx.options.pendingTasks);
    const rows: ResultRow[] = [];
    for (const path of ["load", "enqueue"] as const) {
      for (const mode of ["objects", "packed"] as const) {
        const t0 = Date.now();
        const out = execFileSync(process.execPath, ["--expose-gc", SCRIPT, String(n), mode, path], { encoding: "utf8", maxBuffer: 1 << 20 });
        const m = JSON.parse(out.trim().split("\n").pop()!) as { bytesPerTask: number; packed: number };
        const seconds = (Date.now() - t0) / 1000;
        ctx.progress(`footprint: ${mode} via ${path}: ${m.bytesPerTask.toFixed(0)} B/task`, true);
        rows.push({
          scenario: `footprint ${mode} ${path}`, tasks: n, seconds, tasksPerSec: n / seconds,
          notes: `${m.bytesPerTask.toFixed(0)} bytes per unfinished task (V8 heap + array buffers after a GC); ${m.packed} packed; ` +
            (path === "load" ? "rows as activation reads them" : "enqueued, ids minted as the server mints them"),
          details: { ...m, mode, path },
        });
      }
    }
    return rows;
  },
};
