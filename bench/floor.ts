/**
 * Measures the floor (bench/floor-server.ts: a bare grpc-js unary call plus a
 * group-committed SQLite insert) with one call in flight, from this process, in the same
 * run as the enqueue scenario, so that the serial enqueue can be given as a fraction of it.
 */
import * as grpc from "@grpc/grpc-js";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { CpuMeter, fmtCpu } from "./cpu.js";
import { removeDir, trackChild, trackDir, waitExit } from "./processes.js";
import type { ResultRow } from "./scenario.js";
import { summarize } from "./stats.js";
import { wallNow } from "./time.js";

/** The floor server's one method (bench/floor-server.ts). */
export const FLOOR_PATH = "/conveyor.bench.Floor/Insert";
const SERVER = join(import.meta.dirname, "floor-server.js");

/** `calls` sequential inserts of `bodyBytes` each (after a warm-up of 200). */
export async function measureFloor(calls: number, bodyBytes = 110): Promise<ResultRow> {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-bench-floor-"));
  trackDir(dir);
  const child = spawn(process.execPath, [SERVER, dir], { stdio: ["ignore", "pipe", "inherit"] });
  trackChild(child, "floor-server");
  const port = await new Promise<number>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the floor server exited (${code}) before listening`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const m = /^listening (\d+)$/.exec(line);
      if (m) resolve(Number(m[1]));
    });
  });
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const body = Buffer.alloc(bodyBytes, 7);
  const call = () => new Promise<void>((resolve, reject) =>
    client.makeUnaryRequest(FLOOR_PATH, (b: Buffer) => b, (b: Buffer) => b, body, new grpc.Metadata(), { deadline: Date.now() + 10_000 },
      (err) => (err ? reject(err) : resolve())));
  try {
    for (let i = 0; i < 200; i++) await call();
    const cpu = new CpuMeter({ floor: child.pid!, producer: process.pid });
    const latencies: number[] = [];
    const t0 = wallNow();
    for (let i = 0; i < calls; i++) {
      const t = wallNow();
      await call();
      latencies.push(wallNow() - t);
    }
    const seconds = (wallNow() - t0) / 1000;
    const usage = cpu.reading(calls);
    const lat = summarize(latencies);
    return {
      scenario: "floor: bare unary + SQLite insert (1 in flight)", tasks: calls, seconds, tasksPerSec: calls / seconds, p50Ms: lat.p50, p99Ms: lat.p99,
      notes: `grpc-js unary, ${bodyBytes}-byte insert, group commit, WAL synchronous=NORMAL; calls/s; cpu ${fmtCpu(usage)}`,
      details: { latencyMs: lat, cpuPercent: usage.percent, cpuUsPerTask: usage.usPerTask },
    };
  } finally {
    client.close();
    child.kill("SIGTERM");
    await waitExit(child, 5_000);
    removeDir(dir);
  }
}
