/** Pure parts of conveyord's operability: env-var hints, heartbeat bounds, pretty log lines, failure lines, the operator-action list. */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/node-process.js";
import { closest, editDistance } from "../../src/base/edit-distance.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { KNOWN_ENV_VARS, loadConfig, unknownEnvVars } from "../../src/server/config.js";
import { prettyFactory } from "pino-pretty";
import { isPretty, prettyOptions } from "../../src/server/log-format.js";
import { OPERATOR_ACTIONS, OPERATOR_READS } from "../../src/server/operator-log.js";
import { taskFailures } from "../../src/server/task-failure-log.js";
import type { TaskIndexEntry } from "../../src/grains/queue/task.js";

describe("unknown CONVEYOR_* variables", () => {
  it("measures edit distance", () => {
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("", "abc")).toBe(3);
    expect(editDistance("same", "same")).toBe(0);
    expect(editDistance("TTL", "TLT")).toBe(1);
  });

  it("names the closest known variable, and knows the clients' and development's own", () => {
    expect(unknownEnvVars({ CONVEYOR_LEASE_TLL: "5s", CONVEYOR_SERVER: "x", CONVEYOR_SKIP_PREREQUISITES: "1", PATH: "/bin", CONVEYOR_LISTEN: "a" }))
      .toEqual([{ variable: "CONVEYOR_LEASE_TLL", closest: "CONVEYOR_LEASE_TTL" }]);
    expect(closest("CONVEYOR_HEARTBEAT", KNOWN_ENV_VARS)).toBe("CONVEYOR_HEARTBEAT_INTERVAL");
    expect(KNOWN_ENV_VARS).toContain("CONVEYOR_LOG_FORMAT");
  });
});

/** Every file under `dir` (recursively) whose name ends with one of `extensions`. */
function filesUnder(dir: string, extensions: string[]): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "gen" ? [] : filesUnder(path, extensions);
    return extensions.some((e) => name.endsWith(e)) ? [path] : [];
  });
}

describe("CONVEYOR_* variables: one list", () => {
  it("every variable the code reads is in KNOWN_ENV_VARS (so conveyord never warns of one it uses)", () => {
    const files = ["src", "cli", "scripts", "bin"].flatMap((d) => filesUnder(join(REPO_ROOT, d), [".ts", ".js", ".mjs"]));
    expect(files.length).toBeGreaterThan(50);
    // Code, not comments (which quote typos on purpose).
    const code = (f: string) => readFileSync(f, "utf8").split("\n").filter((l) => !/^\s*(\*|\/\/|\/\*)/.test(l)).join("\n");
    const named = new Set(files.flatMap((f) => [...code(f).matchAll(/\bCONVEYOR_[A-Z][A-Z0-9_]*[A-Z0-9]\b/g)].map((m) => m[0])));
    expect(named.has("CONVEYOR_SERVER")).toBe(true);
    expect([...named].filter((n) => !KNOWN_ENV_VARS.includes(n))).toEqual([]);
  });
});

describe("heartbeat_interval and lease_ttl", () => {
  it("defaults to 1s, or lease_ttl / 3 when that is shorter", () => {
    expect(loadConfig({}).heartbeatIntervalMs).toBe(1_000);
    expect(loadConfig({ overrides: { lease_ttl: "1s" } }).heartbeatIntervalMs).toBe(333);
  });

  it("refuses one set above lease_ttl / 3, from any layer", () => {
    expect(() => loadConfig({ env: { CONVEYOR_HEARTBEAT_INTERVAL: "11s" } })).toThrow(/heartbeat_interval \(11s\) must be at most lease_ttl \/ 3 \(10s with lease_ttl 30s\)/);
    expect(loadConfig({ overrides: { heartbeat_interval: "10s" } }).heartbeatIntervalMs).toBe(10_000);
    expect(() => loadConfig({ overrides: { heartbeat_interval: "0s" } })).toThrow(/heartbeat_interval must be above zero/);
  });
});

describe("pretty log lines", () => {
  /** What pino-pretty makes of one entry with conveyord's settings (no colours). */
  const prettyLine = (entry: Record<string, unknown>): string => prettyFactory(prettyOptions(false))(entry);

  it("puts time (UTC, with its zone), level and message first, then the fields on the same line", () => {
    const line = prettyLine({ level: 40, time: Date.UTC(2030, 0, 2, 3, 4, 5, 6), pid: 1, hostname: "h", node: "n1", msg: "task attempt failed", queue: "emails", attempt: 2, error: "smtp said no" });
    expect(line).toBe('[2030-01-02T03:04:05.006Z] WARN: task attempt failed {"node":"n1","queue":"emails","attempt":2,"error":"smtp said no"}\n');
  });

  it("prints an error's stack below its line", () => {
    const line = prettyLine({ level: 50, time: 0, msg: "boom", err: { type: "Error", message: "disk", stack: "Error: disk\n    at f (a.js:1:1)" } });
    expect(line.split("\n")[0]!.trimEnd()).toBe("[1970-01-01T00:00:00.000Z] ERROR: boom");
    expect(line).toContain("Error: disk");
    expect(line).toContain("at f (a.js:1:1)");
  });

  it("is chosen by the setting, or by the terminal under auto", () => {
    expect([isPretty("auto", true), isPretty("auto", false), isPretty("json", true), isPretty("pretty", false)]).toEqual([true, false, false, true]);
  });
});

describe("failure log lines", () => {
  const entry = (retried: number) => ({ id: "t1", type: "mail", retried, maxRetry: 3 }) as TaskIndexEntry;
  it("come from retry, requeue and failure archive effects, never an operator's archive", () => {
    const failures = taskFailures("q", [
      { kind: "retry", entry: entry(1), outcome: { lastError: "e1", lastFailedAtMs: 1 } },
      { kind: "requeue", entry: entry(2), outcome: { lastError: "lease lapsed", lastFailedAtMs: 2 } },
      { kind: "archive", entry: entry(3), outcome: { lastError: "e4", lastFailedAtMs: 3, finishedAtMs: 3 } },
      { kind: "archive", entry: entry(0), outcome: { lastError: "archived by an operator", finishedAtMs: 4 } },
    ]);
    expect(failures.map((f) => [f.attempt, f.next, f.error])).toEqual([[1, "retry", "e1"], [2, "requeued", "lease lapsed"], [4, "archived", "e4"]]);
    expect(failures[0]).toEqual({ queue: "q", type: "mail", id: "t1", attempt: 1, maxRetry: 3, error: "e1", next: "retry" });
  });
});

describe("operator actions", () => {
  it("every AdminService method is either a logged action or a read", () => {
    const methods = AdminService.methods.map((m) => m.localName);
    const classified = [...Object.keys(OPERATOR_ACTIONS), ...OPERATOR_READS];
    expect([...classified].sort()).toEqual([...methods].sort());
  });
});
