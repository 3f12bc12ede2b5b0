/**
 * Timers beyond Node's setTimeout limit (2^31-1 ms, ~24.8 days; issue 9, finding 4).
 * Node turns a longer delay into 1 ms, so a far-future instant used to fire at once and
 * be re-armed for ever: a spinning node, a TimeoutOverflowWarning per turn on stderr,
 * and in the SDK a handler aborted at once for a deadline weeks away.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, deferred } from "../support/sdk.js";

const DAY_MS = 86_400_000;
/** Clock ticks per second of /proc/<pid>/stat (`getconf CLK_TCK`; 100 on Linux). */
const TICKS_PER_S = 100;

/** CPU time (user + system) a process has used so far, in ms, from /proc/<pid>/stat. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) in parentheses; utime and
  // stime are fields 14 and 15 of the whole line, 12 and 13 after ") ".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1_000) / TICKS_PER_S;
}

describe("timers longer than setTimeout's limit", () => {
  it("a task scheduled 30 days ahead leaves the node idle: no timer overflow, no spinning", async () => {
    const node = await NodeProcess.start();
    const sdk = connect(node);
    try {
      const info = await sdk.client.enqueue(newTask("later", json({})), { queue: "far", processIn: 30 * DAY_MS });
      expect((await sdk.client.getTask(info.id)).state).toBe("scheduled");
      // A measurement window, not a synchronisation: the node's CPU time across 2 s of
      // wall time with nothing to do. An idle node uses ~20 ms of it here (metrics'
      // event-loop monitor); the old code spun a 1 ms timer and used ~350 ms.
      const pid = node.child.pid!;
      const before = cpuMs(pid);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const used = cpuMs(pid) - before;
      expect(used, `node CPU time over 2 s idle (ms)`).toBeLessThan(120);
      expect(node.stderr).not.toContain("TimeoutOverflowWarning");
      expect((await sdk.client.getTask(info.id)).state).toBe("scheduled");
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });

  it("a task with a 30-day deadline (or timeout) runs to completion: the handler's signal does not fire", async () => {
    const node = await NodeProcess.start();
    const sdk = connect(node);
    try {
      const release = deferred();
      const aborted: string[] = [];
      const started: string[] = [];
      const allStarted = deferred();
      const mux = new Mux().handle("long", async (task, ctx) => {
        ctx.signal.addEventListener("abort", () => aborted.push(task.id));
        started.push(task.id);
        if (started.length === 2) allStarted.resolve();
        await release.promise;
        if (ctx.signal.aborted) throw new Error("aborted");
        return "done";
      });
      sdk.worker(mux, { queues: ["far-deadline"] });
      const byDeadline = await sdk.client.enqueue(newTask("long", json({})), { queue: "far-deadline", deadline: new Date(Date.now() + 30 * DAY_MS) });
      const byTimeout = await sdk.client.enqueue(newTask("long", json({})), { queue: "far-deadline", timeout: 30 * DAY_MS });
      await allStarted.promise;
      // Both handlers are running; a round trip to the node is far longer than the 1 ms
      // an overflowing timer would have waited.
      await sdk.waitForState(byDeadline.id, "active");
      await sdk.waitForState(byTimeout.id, "active");
      expect(aborted).toEqual([]);
      release.resolve();
      const done = await Promise.all([sdk.waitForState(byDeadline.id, "completed"), sdk.waitForState(byTimeout.id, "completed")]);
      expect(done.map((t) => t.retried)).toEqual([0, 0]);
      expect(aborted).toEqual([]);
      expect(node.stderr).not.toContain("TimeoutOverflowWarning");
    } finally {
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });
});
