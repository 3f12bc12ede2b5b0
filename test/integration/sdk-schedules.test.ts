/**
 * The SDK's Schedules against a real node: a schedule's ticks reach a Worker, and the
 * operator commands and refusals come back in the SDK's shapes.
 */
import { describe, expect, it } from "vitest";
import { Mux, Schedules, json, newTask } from "../../src/index.js";
import { NodeProcess } from "../support/node-process.js";
import { connect, deferred, rejection } from "../support/sdk.js";

describe("SDK schedules", () => {
  it("set, list, pause, resume, runNow and delete; ticks reach a worker", async () => {
    const node = await NodeProcess.start();
    const sdk = connect(node);
    const schedules = new Schedules({ address: node.grpcAddress });
    const queue = "sdk-schedules";
    try {
      const set = await schedules.set("beat", newTask("beat", json({ n: 1 })), { queue, every: "1s", skipIfRunning: true, priority: 7 });
      expect(set).toMatchObject({ queue, name: "beat", type: "beat", everyMs: 1_000, missedTicks: "latest", skipIfRunning: true, paused: false, lastTaskId: "" });
      const sinceSetMs = set.nextTickAt!.getTime() - set.createdAt!.getTime();
      expect(sinceSetMs > 0 && sinceSetMs % 1_000 === 0, `next tick ${sinceSetMs} ms after the schedule was set`).toBe(true);

      const ran = deferred<{ id: string; payload: unknown }>();
      sdk.worker(new Mux().handle("beat", async (t) => ran.resolve({ id: t.id, payload: t.json() })), { queues: [queue] });
      const first = await ran.promise;
      expect(first.id).toMatch(/^schedule:beat:\d+$/);
      expect(first.payload).toEqual({ n: 1 });

      expect((await schedules.pause("beat", queue)).paused).toBe(true);
      expect((await schedules.resume("beat", queue)).paused).toBe(false);
      const id = await schedules.runNow("beat", queue);
      expect(id).toMatch(/^schedule:beat:now:\d+$/);
      const [listed] = await schedules.list(queue);
      expect(listed).toMatchObject({ name: "beat", lastTaskId: id });
      expect((await sdk.client.getTask(id)).priority).toBe(7);

      const bad = await rejection(schedules.set("x", newTask("beat"), { queue, cron: "0 * * * *", timeZone: "Nowhere/Land" }));
      expect({ code: bad.code, reason: bad.reason, field: bad.field }).toEqual({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "schedule.time_zone" });
      await schedules.delete("beat", queue);
      expect(await schedules.list(queue)).toEqual([]);
      expect(await rejection(schedules.delete("beat", queue))).toMatchObject({ code: "NOT_FOUND", reason: "SCHEDULE_NOT_FOUND" });
    } finally {
      schedules.close();
      await sdk.close();
      await node.stop();
      node.cleanup();
    }
  });
});
