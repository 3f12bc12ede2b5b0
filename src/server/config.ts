/**
 * conveyord configuration: defaults, then conveyor.yaml, then CONVEYOR_* environment
 * variables, then command-line flags (later wins). Durations accept "30s", "5m", ...
 */
import { readFileSync } from "node:fs";
import { CLIENT_ENV_VARS, DEFAULT_ADDRESS } from "../rpc/client.js";
import { closest } from "../base/edit-distance.js";
import { parse as parseYaml } from "yaml";
import { formatDurationMs, parseDurationMs } from "../base/duration.js";
import { DURATION_MAX_MS, GROUP_SIZE_MAX, RATE_BURST_MAX, RATE_MAX_PER_SEC, RATE_MIN_PER_SEC, TIMER_MAX_MS, quote } from "../base/limits.js";

export interface NodeConfig {
  /** gRPC listen address, host:port. */
  listen: string;
  /** HTTP listen address (metrics, health, dashboard), host:port. */
  http: string;
  dataDir: string;
  /** This node's name on the ring; defaults to the gRPC listen address. */
  nodeId: string;
  logLevel: string;
  /** "pretty": one human line per entry; "json": pino's JSON lines; "auto": pretty when stdout is a terminal. */
  logFormat: LogFormat;
  /** "normal" (default) survives process crashes (kill -9); "full" also survives power loss, at an fsync per commit. */
  sqliteSynchronous: "full" | "normal";
  /**
   * "background" (default): WAL checkpoints (and their fsyncs) on a thread of their own;
   * "inline": SQLite's automatic checkpoints, inside the commit that crosses 1,000 pages.
   */
  sqliteCheckpoints: "background" | "inline";
  leaseTtlMs: number;
  /**
   * How often workers heartbeat (also how fast a running task learns it was cancelled); at
   * most lease_ttl / 3. When not set: 1 s, or lease_ttl / 3 if that is shorter.
   */
  heartbeatIntervalMs: number;
  /** Cap on how long one Lease call may park. */
  leaseWaitMaxMs: number;
  leaseWaitersMax: number;
  grainIdleTimeoutMs: number;
  /** Default retention of completed tasks. */
  retentionMs: number;
  /** Retention of archived and cancelled tasks. */
  deadRetentionMs: number;
  janitorIntervalMs: number;
  defaultMaxRetry: number;
  retryBackoffBaseMs: number;
  retryBackoffMaxMs: number;
  /** SIGTERM waits this long for in-flight calls before closing. */
  shutdownGraceMs: number;
  /** Default rate limit of every queue without an override; 0 = unlimited. */
  rateLimitRatePerSec: number;
  /** Burst of the default rate limit; 0 = max(1, ceil(rate)). */
  rateLimitBurst: number;
  /** Server defaults of group aggregation (overridable per queue and per group). */
  groupMaxSize: number;
  groupMaxDelayMs: number;
  groupGracePeriodMs: number;
  /**
   * Read and validated, but unused: groups fire on their own deadlines, not at a periodic
   * sweep. Still accepted so that a conveyor.yaml written for an older node starts.
   */
  groupSweepIntervalMs: number;
  /** Tokens, their roles and queue scopes (security/auth-file.ts); "" = no authentication (loopback only). Reloaded on SIGHUP and when it changes. */
  authFile: string;
  /** Host header names the HTTP port serves besides loopback names and its own address, comma-separated. */
  httpAllowedHosts: string;
  /** PEM files of the certificate (chain) and key both ports serve; "" = no TLS. Reloaded on SIGHUP and when they change. */
  tlsCert: string;
  tlsKey: string;
  /** PEM CA bundle client certificates must chain to; set = mTLS (every connection needs one). */
  tlsClientCa: string;
  /** etcd client URLs, comma-separated; empty = a single node (a ring of one, no etcd). */
  clusterEtcd: string;
  /**
   * NATS URLs of the JetStream cluster that holds the partitions' changelog, comma-separated
   * (cluster part 2); empty = no changelog (a crashed node's partitions wait for it). Needs cluster_etcd.
   */
  clusterNats: string;
  /** With a changelog: how many members keep a warm copy of each partition by following its log (0-2; the first takes over if the owner dies). */
  clusterStandbys: number;
  /** With a changelog: turns appended to a partition between two snapshots of it (0: none); the log is purged below the previous one. */
  clusterSnapshotEvery: number;
  /** The cluster's name: its keys live under /conveyor/<name>/ in etcd. */
  clusterName: string;
  /** Partitions of the cluster; fixed when the cluster is created (stored in etcd). */
  clusterPartitions: number;
  /** TTL of this node's membership lease in etcd (whole seconds). */
  clusterMemberTtlMs: number;
  /** How long a call for a partition this node is handing off waits for the move before it answers RELOCATING. */
  clusterHandoffWaitMs: number;
  /** The gRPC address other nodes and clients reach this node at; default the listen address. */
  clusterAdvertise: string;
  /** File with the cluster's shared secret (one per line; the first is presented, any is accepted): nodes authenticate to each other with it. Reloaded like the auth file. */
  clusterSecretFile: string;
  /** PEM CA bundle the other nodes' TLS certificates chain to, for this node's calls to them; "" = grpc's default roots. Only with TLS on. */
  clusterTlsCa: string;
}

/** The server-wide default rate limit, if one is configured. */
export function defaultRateLimit(config: Pick<NodeConfig, "rateLimitRatePerSec" | "rateLimitBurst">): { ratePerSec: number; burst: number } | undefined {
  if (config.rateLimitRatePerSec <= 0) return undefined;
  return { ratePerSec: config.rateLimitRatePerSec, burst: config.rateLimitBurst || Math.max(1, Math.ceil(config.rateLimitRatePerSec)) };
}

export const DEFAULT_CONFIG: NodeConfig = {
  listen: DEFAULT_ADDRESS,
  http: "127.0.0.1:8080",
  dataDir: "./data",
  nodeId: "",
  logLevel: "info",
  logFormat: "auto",
  sqliteSynchronous: "normal",
  sqliteCheckpoints: "background",
  leaseTtlMs: 30_000,
  heartbeatIntervalMs: 1_000,
  leaseWaitMaxMs: 60_000,
  leaseWaitersMax: 10_000,
  grainIdleTimeoutMs: 5 * 60_000,
  retentionMs: 24 * 3_600_000,
  deadRetentionMs: 30 * 86_400_000,
  janitorIntervalMs: 10_000,
  defaultMaxRetry: 25,
  retryBackoffBaseMs: 1_000,
  retryBackoffMaxMs: 3_600_000,
  shutdownGraceMs: 10_000,
  rateLimitRatePerSec: 0,
  rateLimitBurst: 0,
  groupMaxSize: 100,
  groupMaxDelayMs: 60_000,
  groupGracePeriodMs: 10_000,
  groupSweepIntervalMs: 1_000,
  authFile: "",
  httpAllowedHosts: "",
  tlsCert: "",
  tlsKey: "",
  tlsClientCa: "",
  clusterEtcd: "",
  clusterNats: "",
  clusterStandbys: 1,
  clusterSnapshotEvery: 10_000,
  clusterName: "default",
  clusterPartitions: 64,
  clusterMemberTtlMs: 5_000,
  clusterHandoffWaitMs: 2_000,
  clusterAdvertise: "",
  clusterSecretFile: "",
  clusterTlsCa: "",
};

export const LOG_FORMATS = ["auto", "pretty", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

type Kind = "string" | "duration" | "int" | "number" | "choice";
/**
 * Every setting: its yaml key, env var, how to parse it and (for numbers) its maximum,
 * (for a choice) the values it takes.
 * Settings used directly as a timer are at most TIMER_MAX_MS (Node's setTimeout limit);
 * other durations at most DURATION_MAX_MS, as in requests (src/base/limits.ts).
 */
export const SETTINGS: Array<{ key: keyof NodeConfig; yaml: string; kind: Kind; max?: number; choices?: readonly string[] }> = [
  { key: "listen", yaml: "listen", kind: "string" },
  { key: "http", yaml: "http", kind: "string" },
  { key: "dataDir", yaml: "data_dir", kind: "string" },
  { key: "nodeId", yaml: "node_id", kind: "string" },
  { key: "logLevel", yaml: "log_level", kind: "string" },
  { key: "logFormat", yaml: "log_format", kind: "choice", choices: LOG_FORMATS },
  { key: "sqliteSynchronous", yaml: "sqlite_synchronous", kind: "choice", choices: ["full", "normal"] },
  { key: "sqliteCheckpoints", yaml: "sqlite_checkpoints", kind: "choice", choices: ["background", "inline"] },
  { key: "leaseTtlMs", yaml: "lease_ttl", kind: "duration", max: TIMER_MAX_MS },
  { key: "heartbeatIntervalMs", yaml: "heartbeat_interval", kind: "duration", max: TIMER_MAX_MS },
  { key: "leaseWaitMaxMs", yaml: "lease_wait_max", kind: "duration", max: TIMER_MAX_MS },
  { key: "leaseWaitersMax", yaml: "lease_waiters_max", kind: "int" },
  { key: "grainIdleTimeoutMs", yaml: "grain_idle_timeout", kind: "duration", max: TIMER_MAX_MS },
  { key: "retentionMs", yaml: "retention", kind: "duration", max: DURATION_MAX_MS },
  { key: "deadRetentionMs", yaml: "dead_retention", kind: "duration", max: DURATION_MAX_MS },
  { key: "janitorIntervalMs", yaml: "janitor_interval", kind: "duration", max: TIMER_MAX_MS },
  { key: "defaultMaxRetry", yaml: "max_retry", kind: "int" },
  { key: "retryBackoffBaseMs", yaml: "retry_backoff_base", kind: "duration", max: DURATION_MAX_MS },
  { key: "retryBackoffMaxMs", yaml: "retry_backoff_max", kind: "duration", max: DURATION_MAX_MS },
  { key: "shutdownGraceMs", yaml: "shutdown_grace", kind: "duration", max: TIMER_MAX_MS },
  { key: "rateLimitRatePerSec", yaml: "rate_limit_rate_per_sec", kind: "number", max: RATE_MAX_PER_SEC },
  { key: "rateLimitBurst", yaml: "rate_limit_burst", kind: "int", max: RATE_BURST_MAX },
  { key: "groupMaxSize", yaml: "group_max_size", kind: "int", max: GROUP_SIZE_MAX },
  { key: "groupMaxDelayMs", yaml: "group_max_delay", kind: "duration", max: DURATION_MAX_MS },
  { key: "groupGracePeriodMs", yaml: "group_grace_period", kind: "duration", max: DURATION_MAX_MS },
  { key: "groupSweepIntervalMs", yaml: "group_sweep_interval", kind: "duration", max: TIMER_MAX_MS },
  { key: "authFile", yaml: "auth_file", kind: "string" },
  { key: "httpAllowedHosts", yaml: "http_allowed_hosts", kind: "string" },
  { key: "tlsCert", yaml: "tls_cert", kind: "string" },
  { key: "tlsKey", yaml: "tls_key", kind: "string" },
  { key: "tlsClientCa", yaml: "tls_client_ca", kind: "string" },
  { key: "clusterEtcd", yaml: "cluster_etcd", kind: "string" },
  { key: "clusterNats", yaml: "cluster_nats", kind: "string" },
  { key: "clusterStandbys", yaml: "cluster_standbys", kind: "int", max: 2 },
  { key: "clusterSnapshotEvery", yaml: "cluster_snapshot_every", kind: "int", max: 100_000_000 },
  { key: "clusterName", yaml: "cluster_name", kind: "string" },
  { key: "clusterPartitions", yaml: "cluster_partitions", kind: "int", max: 4096 },
  { key: "clusterMemberTtlMs", yaml: "cluster_member_ttl", kind: "duration", max: 60_000 },
  { key: "clusterHandoffWaitMs", yaml: "cluster_handoff_wait", kind: "duration", max: TIMER_MAX_MS },
  { key: "clusterAdvertise", yaml: "cluster_advertise", kind: "string" },
  { key: "clusterSecretFile", yaml: "cluster_secret_file", kind: "string" },
  { key: "clusterTlsCa", yaml: "cluster_tls_ca", kind: "string" },
];

/** Integers that have no tighter bound still travel as int32/uint32 on the wire. */
const INT_MAX = 2 ** 31 - 1;

/** The yaml keys, for `conveyord --help`. */
export const SETTING_NAMES = SETTINGS.map((s) => s.yaml);

export const envNameOf = (yaml: string) => `CONVEYOR_${yaml.toUpperCase()}`;

/** Read by scripts/test-prerequisites.mjs (plain JS, so written out here too). */
const DEVELOPMENT_ENV_VARS = ["CONVEYOR_SKIP_PREREQUISITES", "CONVEYOR_TEST_PARTS"];

/** Every CONVEYOR_* variable some component reads: the node's settings, the clients' (SDK, CLI), development's. */
export const KNOWN_ENV_VARS: readonly string[] = [...SETTING_NAMES.map(envNameOf), ...CLIENT_ENV_VARS, ...DEVELOPMENT_ENV_VARS];

/**
 * The CONVEYOR_* variables of `env` that nothing reads (a typo such as CONVEYOR_LEASE_TLL
 * would otherwise be ignored without a word), each with the known name nearest to it.
 */
export function unknownEnvVars(env: NodeJS.ProcessEnv): Array<{ variable: string; closest: string }> {
  return Object.keys(env)
    .filter((name) => name.startsWith("CONVEYOR_") && !KNOWN_ENV_VARS.includes(name))
    .sort()
    .map((variable) => ({ variable, closest: closest(variable, KNOWN_ENV_VARS)! }));
}

function parseValue(kind: Kind, name: string, raw: unknown, max = INT_MAX, choices: readonly string[] = []): string | number {
  const text = String(raw).trim();
  switch (kind) {
    case "string":
      return text;
    case "duration": {
      let ms: number;
      try {
        ms = typeof raw === "number" ? raw : parseDurationMs(text);
      } catch (e) {
        throw new Error(`${name}: ${(e as Error).message}`);
      }
      if (!Number.isInteger(ms) || ms < 0) throw new Error(`${name}: expected a non-negative whole number of milliseconds, got ${quote(text)}`);
      if (ms > max) throw new Error(`${name}: must be at most ${formatDurationMs(max)} (${max} ms), got ${quote(text)}`);
      return ms;
    }
    case "int": {
      const n = Number(text);
      if (!Number.isInteger(n) || n < 0) throw new Error(`${name}: expected a non-negative integer, got ${quote(text)}`);
      if (n > max) throw new Error(`${name}: must be at most ${max}, got ${quote(text)}`);
      return n;
    }
    case "number": {
      const n = Number(text);
      if (!Number.isFinite(n) || n < 0) throw new Error(`${name}: expected a non-negative number, got ${quote(text)}`);
      if (n > max) throw new Error(`${name}: must be at most ${max}, got ${quote(text)}`);
      return n;
    }
    case "choice":
      if (!choices.includes(text)) {
        const expected = choices.length === 2 ? `${quote(choices[0]!)} or ${quote(choices[1]!)}` : `one of ${choices.join(", ")}`;
        throw new Error(`${name}: expected ${expected}, got ${quote(text)}`);
      }
      return text;
  }
}

/**
 * Builds the config from a yaml file (optional), the environment and flag overrides
 * (keyed by yaml name). Unknown yaml keys are an error, so a typo never goes unseen.
 */
export function loadConfig(options: { file?: string; env?: NodeJS.ProcessEnv; overrides?: Record<string, string> }): NodeConfig {
  const config: Record<string, unknown> = { ...DEFAULT_CONFIG };
  const layers: Array<[string, Record<string, unknown>]> = [];
  if (options.file) {
    const doc = (parseYaml(readFileSync(options.file, "utf8")) ?? {}) as Record<string, unknown>;
    if (typeof doc !== "object" || Array.isArray(doc)) throw new Error(`${options.file}: expected a mapping of settings`);
    for (const k of Object.keys(doc)) {
      if (!SETTING_NAMES.includes(k)) throw new Error(`${options.file}: unknown setting ${JSON.stringify(k)}; known: ${SETTING_NAMES.join(", ")}`);
    }
    layers.push([options.file, doc]);
  }
  const env = options.env ?? {};
  const fromEnv: Record<string, unknown> = {};
  for (const s of SETTINGS) if (env[envNameOf(s.yaml)] !== undefined) fromEnv[s.yaml] = env[envNameOf(s.yaml)];
  layers.push(["environment", fromEnv], ["flags", options.overrides ?? {}]);
  for (const [source, layer] of layers) {
    for (const s of SETTINGS) {
      if (layer[s.yaml] === undefined) continue;
      config[s.key] = parseValue(s.kind, `${source}: ${s.yaml}`, layer[s.yaml], s.max, s.choices);
    }
  }
  const heartbeatSet = layers.some(([, layer]) => layer.heartbeat_interval !== undefined);
  const result = config as unknown as NodeConfig;
  if (!result.nodeId) result.nodeId = result.listen;
  if (result.rateLimitRatePerSec > 0 && result.rateLimitRatePerSec < RATE_MIN_PER_SEC) {
    throw new Error(`rate_limit_rate_per_sec must be 0 (unlimited) or at least ${RATE_MIN_PER_SEC}, got ${result.rateLimitRatePerSec}`);
  }
  if (result.rateLimitBurst > 0 && result.rateLimitRatePerSec === 0) {
    throw new Error("rate_limit_burst is set but rate_limit_rate_per_sec is not");
  }
  if (result.groupMaxSize < 1) throw new Error(`group_max_size must be at least 1, got ${result.groupMaxSize}`);
  for (const [name, v] of [["group_max_delay", result.groupMaxDelayMs], ["group_grace_period", result.groupGracePeriodMs], ["group_sweep_interval", result.groupSweepIntervalMs]] as const) {
    if (v <= 0) throw new Error(`${name} must be above zero`);
  }
  if (result.clusterNats.trim() !== "" && result.clusterEtcd.trim() === "") {
    throw new Error("cluster_nats needs cluster_etcd: the changelog records the partitions of a cluster, and a single node has none to fail over");
  }
  if (result.clusterPartitions < 1) throw new Error(`cluster_partitions must be at least 1, got ${result.clusterPartitions}`);
  if (result.clusterMemberTtlMs < 1_000 || result.clusterMemberTtlMs % 1_000 !== 0) {
    throw new Error(`cluster_member_ttl must be a whole number of seconds, at least 1s (etcd leases are whole seconds), got ${formatDurationMs(result.clusterMemberTtlMs)}`);
  }
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(result.clusterName)) throw new Error(`cluster_name must be 1-64 of A-Z a-z 0-9 . _ -, got ${quote(result.clusterName)}`);
  if (result.leaseTtlMs < 100) throw new Error(`lease_ttl must be at least 100ms, got ${result.leaseTtlMs}ms`);
  // A lease must survive a late heartbeat or two: three heartbeats fit in one lease_ttl.
  const heartbeatMax = Math.floor(result.leaseTtlMs / 3);
  if (!heartbeatSet) {
    result.heartbeatIntervalMs = Math.min(result.heartbeatIntervalMs, heartbeatMax);
  } else if (result.heartbeatIntervalMs > heartbeatMax) {
    throw new Error(`heartbeat_interval (${formatDurationMs(result.heartbeatIntervalMs)}) must be at most lease_ttl / 3 ` +
      `(${formatDurationMs(heartbeatMax)} with lease_ttl ${formatDurationMs(result.leaseTtlMs)})`);
  }
  if (result.heartbeatIntervalMs <= 0) throw new Error("heartbeat_interval must be above zero");
  return result;
}
