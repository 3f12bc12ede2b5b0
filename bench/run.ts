/**
 * `npm run bench`: starts real conveyord processes on loopback (a fresh data dir per
 * measurement) and worker processes, runs the registered scenarios, prints a table to
 * stdout (progress goes to stderr) and writes bench-results/<timestamp>.json and
 * bench-results/latest.json.
 *
 *   node dist/bench/run.js [--only enqueue,e2e,latency,keys,batch,rules,upkeep,store,retained,footprint,pending,pending-keys,pending-queues] [--tasks 20000]
 *       [--latency-tasks 2000] [--latency-rate 200] [--retained-tasks 3000000]
 *       [--retained-delete-seconds 600] [--pending-tasks 1000000] [--set key=value ...] [--out DIR]
 *
 * Environment: BENCH_DAEMON_ARGS / BENCH_WORKER_ARGS add node flags to the daemon /
 * worker processes (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
 *
 * To add a scenario: write bench/scenarios/<name>.ts exporting a `Scenario` and add it
 * to SCENARIOS below.
 */
import { mkdirSync, statfsSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { REPO_ROOT } from "./daemon.js";
import { machineBusyPercent } from "./cpu.js";
import { installCleanupHandlers } from "./processes.js";
import { runScenario } from "./runner.js";
import { targetMet, type BenchOptions, type ResultRow, type Scenario } from "./scenario.js";
import { batchScenario } from "./scenarios/batch.js";
import { e2eScenario } from "./scenarios/e2e.js";
import { enqueueScenario } from "./scenarios/enqueue.js";
import { footprintScenario } from "./scenarios/footprint.js";
import { keysScenario } from "./scenarios/keys.js";
import { latencyScenario } from "./scenarios/latency.js";
import { pendingKeysScenario, pendingQueuesScenario, pendingScenario } from "./scenarios/pending.js";
import { retainedScenario } from "./scenarios/retained.js";
import { rulesScenario } from "./scenarios/rules.js";
import { storeScenario } from "./scenarios/store.js";
import { upkeepScenario } from "./scenarios/upkeep.js";
import { fmtMs, fmtNum, renderTable } from "./stats.js";

/** Machine CPU use (by others, sampled before a scenario) above which results are flagged as noisy. */
const BUSY_PERCENT = 10;

/** Every scenario, in run order. */
const SCENARIOS: Scenario[] = [
  enqueueScenario, e2eScenario, latencyScenario, keysScenario, batchScenario, rulesScenario, upkeepScenario, storeScenario, retainedScenario,
  footprintScenario, pendingScenario, pendingKeysScenario, pendingQueuesScenario,
];

const USAGE = `usage: node dist/bench/run.js [--only NAME,...] [--tasks N] [--latency-tasks N] [--latency-rate R] [--retained-tasks N]
       [--retained-delete-seconds S] [--pending-tasks N] [--set key=value ...] [--out DIR]
scenarios:
${SCENARIOS.map((s) => `  ${s.name.padEnd(14)} ${s.description}`).join("\n")}`;

function parseOptions(): { options: BenchOptions; selected: Scenario[]; outDir: string } {
  const { values } = parseArgs({
    options: {
      only: { type: "string" },
      tasks: { type: "string" },
      "latency-tasks": { type: "string" },
      "latency-rate": { type: "string" },
      "retained-tasks": { type: "string" },
      "retained-delete-seconds": { type: "string" },
      "pending-tasks": { type: "string" },
      set: { type: "string", multiple: true },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const positive = (name: string, raw: string | undefined, fallback: number) => {
    if (raw === undefined) return fallback;
    const n = Number(raw.replaceAll("_", ""));
    if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} expects a positive integer, got ${JSON.stringify(raw)}`);
    return n;
  };
  const settings: Record<string, string> = {};
  for (const pair of values.set ?? []) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new Error(`--set expects key=value, got ${JSON.stringify(pair)}`);
    settings[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  let selected = SCENARIOS;
  if (values.only) {
    const names = values.only.split(",").map((s) => s.trim()).filter(Boolean);
    const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
    if (unknown.length > 0) throw new Error(`--only: unknown scenario ${unknown.join(", ")}\n${USAGE}`);
    selected = SCENARIOS.filter((s) => names.includes(s.name));
  }
  return {
    options: {
      tasks: positive("tasks", values.tasks, 20_000),
      latencyTasks: positive("latency-tasks", values["latency-tasks"], 2_000),
      latencyRate: positive("latency-rate", values["latency-rate"], 200),
      retainedTasks: positive("retained-tasks", values["retained-tasks"], 3_000_000),
      retainedDeleteSeconds: positive("retained-delete-seconds", values["retained-delete-seconds"], 600),
      pendingTasks: positive("pending-tasks", values["pending-tasks"], 1_000_000),
      settings,
    },
    selected,
    outDir: values.out ?? join(REPO_ROOT, "bench-results"),
  };
}

function machine() {
  const cpus = os.cpus();
  let tmpFs: string | undefined;
  try {
    tmpFs = `0x${statfsSync(os.tmpdir()).type.toString(16)}`;
  } catch {
    tmpFs = undefined;
  }
  return {
    hostname: os.hostname(), platform: os.platform(), release: os.release(), arch: os.arch(),
    cpus: cpus.length, cpuModel: cpus[0]?.model ?? "unknown", totalMemMB: Math.round(os.totalmem() / 2 ** 20),
    loadavg: os.loadavg(), node: process.version, tmpdir: os.tmpdir(), tmpdirFsMagic: tmpFs,
  };
}

function table(rows: readonly ResultRow[]): string {
  const header = ["scenario", "tasks", "seconds", "tasks/s", "p50 ms", "p99 ms", "notes"];
  const body = rows.map((r) => [
    r.scenario, r.tasks.toLocaleString("en-US"), r.seconds.toFixed(2), fmtNum(r.tasksPerSec), fmtMs(r.p50Ms), fmtMs(r.p99Ms), r.notes,
  ]);
  return renderTable(header, body, new Set([1, 2, 3, 4, 5]));
}

function targetLines(rows: readonly ResultRow[]): string[] {
  return rows.flatMap((r) => (r.targets ?? []).map((t) =>
    `  ${targetMet(t) ? "met " : "MISS"}  ${r.scenario}: ${t.metric} ${t.op} ${fmtNum(t.value)} (actual ${t.unit === "ms" ? fmtMs(t.actual) : fmtNum(t.actual)})`));
}

async function main(): Promise<void> {
  installCleanupHandlers();
  const { options, selected, outDir } = parseOptions();
  const info = machine();
  process.stderr.write(`conveyor bench: ${selected.map((s) => s.name).join(", ")}; ${options.tasks} tasks; ` +
    `${info.cpus} x ${info.cpuModel}; node ${info.node}\n`);
  const startedAt = new Date();
  const rows: ResultRow[] = [];
  const failures: Array<{ scenario: string; error: string }> = [];
  /** Scenarios that started while other processes kept the machine busy. */
  const busy: string[] = [];
  for (const scenario of selected) {
    process.stderr.write(`> ${scenario.name}: ${scenario.description}\n`);
    const t0 = Date.now();
    const otherLoad = await machineBusyPercent();
    if (otherLoad !== undefined && otherLoad > BUSY_PERCENT) busy.push(`${scenario.name} (${otherLoad}% busy)`);
    try {
      const produced = await runScenario(scenario, options);
      for (const row of produced) row.details = { ...row.details, machineBusyPercentBefore: otherLoad };
      rows.push(...produced);
      process.stderr.write(`  ${scenario.name} finished in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    } catch (error) {
      const message = error instanceof Error ? error.stack ?? error.message : String(error);
      failures.push({ scenario: scenario.name, error: message });
      process.stderr.write(`  ${scenario.name} FAILED: ${message}\n`);
    }
  }

  const out = [
    `conveyor bench — ${info.cpus} x ${info.cpuModel}, node ${info.node}, ${info.platform} ${info.release}`,
    "",
    table(rows),
  ];
  const targets = targetLines(rows);
  if (targets.length > 0) out.push("", "targets:", ...targets);
  if (busy.length > 0) {
    out.push("", `note: other processes kept the machine busy (CPU sampled for 1 s before each scenario, > ${BUSY_PERCENT}% of all cores) ` +
      `when these started; their numbers are noisy: ${busy.join(", ")}`);
  }
  if (failures.length > 0) out.push("", ...failures.map((f) => `FAILED: ${f.scenario}: ${f.error.split("\n")[0]}`));
  process.stdout.write(`${out.join("\n")}\n`);

  const result = {
    startedAt: startedAt.toISOString(), finishedAt: new Date().toISOString(), machine: info, options,
    scenarios: selected.map((s) => s.name), busyAtStart: busy, results: rows,
    targets: rows.flatMap((r) => (r.targets ?? []).map((t) => ({ scenario: r.scenario, ...t, met: targetMet(t) }))),
    failures,
  };
  mkdirSync(outDir, { recursive: true });
  const file = join(outDir, `${startedAt.toISOString().replaceAll(":", "-").replace(/\.\d+Z$/, "Z")}.json`);
  const text = `${JSON.stringify(result, null, 2)}\n`;
  writeFileSync(file, text);
  writeFileSync(join(outDir, "latest.json"), text);
  process.stderr.write(`wrote ${file} and ${join(outDir, "latest.json")}\n`);
  if (failures.length > 0) process.exitCode = 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
