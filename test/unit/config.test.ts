/** conveyord configuration: defaults < conveyor.yaml < CONVEYOR_* env < flags, and clear errors. */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_CONFIG, defaultRateLimit, loadConfig } from "../../src/server/config.js";
import { formatDurationMs, parseDurationMs } from "../../src/base/duration.js";

function yamlFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "conveyor-config-")), "conveyor.yaml");
  writeFileSync(path, text);
  return path;
}

describe("loadConfig", () => {
  it("uses the defaults the README documents", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ listen: "127.0.0.1:7233", http: "127.0.0.1:8080", dataDir: "./data", nodeId: "127.0.0.1:7233" });
    expect(c).toMatchObject({ groupMaxSize: 100, groupMaxDelayMs: 60_000, groupGracePeriodMs: 10_000, groupSweepIntervalMs: 1_000 });
    expect(defaultRateLimit(c)).toBeUndefined();
    expect(c.leaseTtlMs).toBe(DEFAULT_CONFIG.leaseTtlMs);
    expect(c).toMatchObject({ sqliteSynchronous: "normal", sqliteCheckpoints: "background" });
    expect(loadConfig({ env: { CONVEYOR_SQLITE_CHECKPOINTS: "inline" } }).sqliteCheckpoints).toBe("inline");
  });

  it("layers yaml, then environment, then flags", () => {
    const file = yamlFile("lease_ttl: 20s\ngroup_max_size: 50\nrate_limit_rate_per_sec: 2.5\nretention: 6h\n");
    const c = loadConfig({
      file,
      env: { CONVEYOR_GROUP_MAX_SIZE: "70", CONVEYOR_LISTEN: "0.0.0.0:9000" },
      overrides: { group_max_size: "80" },
    });
    expect(c.leaseTtlMs).toBe(20_000);
    expect(c.retentionMs).toBe(6 * 3_600_000);
    expect(c.groupMaxSize).toBe(80);
    expect(c.listen).toBe("0.0.0.0:9000");
    expect(defaultRateLimit(c)).toEqual({ ratePerSec: 2.5, burst: 3 });
  });

  it("names the problem: an unknown key, a bad duration, an impossible value", () => {
    expect(() => loadConfig({ file: yamlFile("lease_tll: 5s\n") })).toThrow(/unknown setting "lease_tll"/);
    expect(() => loadConfig({ overrides: { lease_ttl: "soon" } })).toThrow(/flags: lease_ttl: invalid duration "soon"/);
    expect(() => loadConfig({ env: { CONVEYOR_GROUP_MAX_SIZE: "0" } })).toThrow(/group_max_size must be at least 1/);
    expect(() => loadConfig({ overrides: { sqlite_synchronous: "sometimes" } })).toThrow(/"full" or "normal"/);
    expect(() => loadConfig({ overrides: { sqlite_checkpoints: "never" } })).toThrow(/sqlite_checkpoints: expected "background" or "inline", got "never"/);
  });

  it("bounds every number: durations, timers, rates, sizes", () => {
    // A duration that would overflow once `now` is added.
    expect(() => loadConfig({ overrides: { retention: "106751991000d" } })).toThrow(/flags: retention: must be at most 36525d \(3155760000000 ms\)/);
    expect(() => loadConfig({ file: yamlFile("dead_retention: 9223372036854775807\n") })).toThrow(/dead_retention: must be at most/);
    // Settings used as a timer stay within Node's setTimeout limit.
    expect(() => loadConfig({ overrides: { janitor_interval: "30d" } })).toThrow(/janitor_interval: must be at most 24d20h31m24s/);
    expect(loadConfig({ overrides: { janitor_interval: "24d" } }).janitorIntervalMs).toBe(24 * 86_400_000);
    // A yaml number is milliseconds: negative or fractional ones are refused.
    expect(() => loadConfig({ file: yamlFile("lease_ttl: -5\n") })).toThrow(/lease_ttl: expected a non-negative whole number of milliseconds/);
    expect(() => loadConfig({ file: yamlFile("group_max_delay: .nan\n") })).toThrow(/group_max_delay: expected a non-negative whole number/);
    expect(() => loadConfig({ overrides: { rate_limit_rate_per_sec: "1e308" } })).toThrow(/rate_limit_rate_per_sec: must be at most 1000000/);
    expect(() => loadConfig({ overrides: { rate_limit_rate_per_sec: "1e-9" } })).toThrow(/at least 0.000001/);
    expect(() => loadConfig({ overrides: { max_retry: "9e300" } })).toThrow(/max_retry: must be at most 2147483647/);
    expect(() => loadConfig({ overrides: { group_max_size: "1001" } })).toThrow(/group_max_size: must be at most 1000/);
  });
});

describe("durations", () => {
  it("parses and formats the forms the CLI and config accept", () => {
    expect(parseDurationMs("1m30s")).toBe(90_000);
    expect(parseDurationMs("250")).toBe(250);
    expect(parseDurationMs("1.5s")).toBe(1_500);
    expect(() => parseDurationMs("5 minutes")).toThrow(/invalid duration/);
    expect(formatDurationMs(90_000)).toBe("1m30s");
    expect(formatDurationMs(20)).toBe("20ms");
  });
});
