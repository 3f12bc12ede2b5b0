/**
 * `conveyor schedule` end to end: the built CLI against a real conveyord (needs
 * `npm run build`). A round trip through every verb, and the server's refusals shown
 * with the field at fault.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";

const CLI = join(REPO_ROOT, "bin/conveyor.js");
let node: NodeProcess;

function conveyor(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env };
  delete env.CONVEYOR_SERVER;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [CLI, "--server", node.grpcAddress, ...args], { cwd: REPO_ROOT, env, timeout: 20_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

async function ok(...args: string[]): Promise<string> {
  const run = await conveyor(...args);
  expect(run, `conveyor ${args.join(" ")}`).toMatchObject({ code: 0, stderr: "" });
  return run.stdout;
}

interface ScheduleJson {
  name: string;
  paused: boolean;
  cron?: string;
  timeZone: string;
  lastTaskId: string;
  nextTickAtMs: string;
  task: { queue: string; type: string };
}

beforeAll(async () => {
  node = await NodeProcess.start();
});

afterAll(async () => {
  await node?.stop();
  node?.cleanup();
});

describe("conveyor schedule", () => {
  it("set, ls, pause, resume, run-now and rm round-trip through the node", async () => {
    const set = await ok("schedule", "set", "nightly", "--queue", "reports", "--type", "report:build", "--cron", "30 2 * * *",
      "--tz", "Europe/Berlin", "--skip-if-running", "--payload", "{\"full\":true}", "--priority", "7");
    expect(set).toMatch(/^schedule nightly of queue reports: cron "30 2 \* \* \*" Europe\/Berlin, next tick /);
    const ls = await ok("schedule", "ls");
    expect(ls).toMatch(/reports[\s│]+nightly[\s│]+report:build[\s│]+cron "30 2 \* \* \*" Europe\/Berlin[\s│]+active[\s│]+2\d{3}-/);

    await ok("schedule", "pause", "nightly", "--queue", "reports");
    const [paused] = (JSON.parse(await ok("schedule", "ls", "--queue", "reports", "--json")) as { schedules: ScheduleJson[] }).schedules;
    expect(paused).toMatchObject({ name: "nightly", paused: true, cron: "30 2 * * *", timeZone: "Europe/Berlin", task: { queue: "reports", type: "report:build" } });
    expect(await ok("schedule", "resume", "nightly", "--queue", "reports")).toMatch(/^schedule nightly resumed, next tick /);

    const run = await ok("schedule", "run-now", "nightly", "--queue", "reports");
    const id = /^enqueued (schedule:nightly:now:\d+)\n$/.exec(run)?.[1];
    expect(id, run).toBeDefined();
    expect(await ok("task", "get", id!)).toContain("report:build");
    expect(await ok("schedule", "ls", "--queue", "reports")).toContain(id!);

    expect(await ok("schedule", "rm", "nightly", "--queue", "reports")).toBe("schedule nightly removed\n");
    expect(await ok("schedule", "ls")).toBe("no schedules\n");
  });

  it("a bad cron expression or zone is refused by the node with the field named; nothing is stored", async () => {
    const badCron = await conveyor("schedule", "set", "x", "--type", "t", "--cron", "61 * * * *");
    expect(badCron.code).not.toBe(0);
    expect(badCron.stderr).toContain("schedule.cron");
    const badZone = await conveyor("schedule", "set", "x", "--type", "t", "--cron", "0 * * * *", "--tz", "Atlantis/Capital");
    expect(badZone.code).not.toBe(0);
    expect(badZone.stderr).toContain("schedule.time_zone");
    const noCadence = await conveyor("schedule", "set", "x", "--type", "t");
    expect(noCadence.stderr).toContain("set cron or interval_ms");
    const unknown = await conveyor("schedule", "rm", "nope");
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/no schedule "nope"/);
    expect(await ok("schedule", "ls")).toBe("no schedules\n");
  });
});
