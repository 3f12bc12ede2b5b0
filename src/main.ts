/**
 * conveyord: the process entry. Reads flags, conveyor.yaml and CONVEYOR_* variables,
 * starts a node, and stops it gracefully on SIGTERM/SIGINT. `conveyord backup` copies a
 * live node's data file from this second process.
 */
import { join } from "node:path";
import { Command } from "commander";
import { DEFAULT_CONFIG, loadConfig, LOG_FORMATS, SETTING_NAMES, envNameOf, unknownEnvVars } from "./server/config.js";
import { createLogger } from "./server/log-format.js";
import { packageInfo } from "./version.js";
import { INSECURE_FLAG } from "./server/security/exposure.js";
import { hashToken, newToken } from "./server/security/tokens.js";

const program = new Command()
  .name("conveyord")
  .description("Run a conveyor node: gRPC for producers and workers, HTTP for metrics, health and the dashboard.")
  .version(packageInfo().version)
  .enablePositionalOptions()
  .option("--listen <host:port>", `gRPC listen address (default ${DEFAULT_CONFIG.listen})`)
  .option("--http <host:port>", `HTTP listen address for /metrics, /healthz and the dashboard (default ${DEFAULT_CONFIG.http})`)
  .option("--data-dir <dir>", `directory of the SQLite data file (default ${DEFAULT_CONFIG.dataDir})`)
  .option("--config <file>", "a conveyor.yaml with any of the settings below")
  .option("--log-level <level>", "trace, debug, info, warn or error (default info)")
  .option("--log-format <format>", `${LOG_FORMATS.join(", ")}: human lines or JSON lines (default auto: pretty on a terminal, JSON otherwise)`)
  .option("--cluster-etcd <urls>", "join a cluster: etcd client URLs, comma-separated (cluster_etcd; default none: a single node)")
  .option("--cluster-nats <urls>", "the partitions' changelog: NATS JetStream URLs, comma-separated (cluster_nats; default none)")
  .option("--node-id <id>", "this node's name in the cluster (node_id; default the listen address)")
  .option("--advertise <host:port>", "the gRPC address other nodes and clients reach this node at (cluster_advertise)")
  .option("--set <key=value...>", "override any setting, e.g. --set lease_ttl=10s")
  .option(INSECURE_FLAG, "start even though a non-loopback address has no authentication (anyone who reaches the ports may do anything)")
  .addHelpText("after", `\nSettings (conveyor.yaml keys; env ${envNameOf("<key>")}):\n  ${SETTING_NAMES.join(", ")}\n`)
  .action(runNode);

program
  .command("backup")
  .description("Copy a node's data file, while the node runs, into one consistent, self-contained SQLite file. " +
    "Run it on the node's machine; the data dir comes from --data-dir, or --config and CONVEYOR_DATA_DIR as for the node.")
  .requiredOption("--out <file>", "the backup file to write (its folder must exist)")
  .option("--data-dir <dir>", "the node's data directory (default ./data)")
  .option("--config <file>", "the node's conveyor.yaml, for its data_dir")
  .option("--force", "replace --out if it exists")
  .action(async (own: { out: string; dataDir?: string; config?: string; force?: boolean }) => {
    // `conveyord --data-dir D backup ...` means the same as `conveyord backup --data-dir D ...`.
    const opts = { ...program.opts<{ dataDir?: string; config?: string }>(), ...withoutUndefined(own) };
    const config = loadConfig({
      ...(opts.config ? { file: opts.config } : {}), env: process.env, overrides: opts.dataDir ? { data_dir: opts.dataDir } : {},
    });
    const { backupDataFile } = await import("./storage/backup.js");
    const result = await backupDataFile(join(config.dataDir, "conveyor.db"), own.out, { overwrite: own.force === true });
    process.stdout.write(`backed up ${join(config.dataDir, "conveyor.db")} to ${result.file}: ${result.bytes} bytes, ` +
      `${result.tasks} tasks, schema version ${result.schemaVersion}, in ${Math.round(result.elapsedMs)} ms\n`);
  });

const token = program.command("token").description("Make bearer tokens for the auth file (see docs/security.md).");
token
  .command("new")
  .description("Print a new random token (give it to the client) and its sha256 (put it in the auth file); " +
    "with --name, also the auth file entry to paste under tokens:.")
  .option("--name <name>", "print the auth file entry for this name")
  .option("--roles <roles>", "with --name: comma-separated roles (admin, producer, worker, reader)", "reader")
  .option("--queues <patterns>", "with --name: comma-separated queue name patterns (* = any run of characters) the token is limited to; default every queue")
  .action(async (opts: { name?: string; roles: string; queues?: string }) => {
    if (opts.name === undefined && opts.queues !== undefined) throw new Error("token new: --queues goes with --name (it shapes the printed auth file entry)");
    const { token: value, sha256 } = newToken();
    const { authFileEntry } = await import("./server/security/auth-entry.js");
    // Checked before anything is printed: a refused entry prints no token either.
    const entry = opts.name !== undefined ? authFileEntry({ name: opts.name, sha256, roles: opts.roles, queues: opts.queues }) : undefined;
    process.stdout.write(`token:  ${value}\nsha256: ${sha256}\n`);
    if (entry) process.stdout.write(`# auth file entry (under tokens:)\n${entry}`);
  });
token
  .command("hash")
  .description("Print the sha256 of a token read from stdin (for a token made elsewhere).")
  .action(async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    const value = Buffer.concat(chunks).toString("utf8").trim();
    if (value === "") throw new Error("token hash: give the token on stdin, e.g. printf %s \"$TOKEN\" | conveyord token hash");
    process.stdout.write(`${hashToken(value)}\n`);
  });

program
  .command("cluster-secret")
  .description("Print a new random cluster secret (256 bits) for cluster_secret_file; give every node of the cluster the same file " +
    "(see docs/cluster/deploy.md).")
  .action(async () => {
    const { newClusterSecret } = await import("./server/security/cluster-secret.js");
    process.stdout.write(`${newClusterSecret()}\n`);
  });

async function runNode(): Promise<void> {
  const opts = program.opts<{
    listen?: string; http?: string; dataDir?: string; config?: string; logLevel?: string; logFormat?: string; set?: string[];
    insecureAllowUnauthenticatedNetwork?: boolean; clusterEtcd?: string; clusterNats?: string; nodeId?: string; advertise?: string;
  }>();
  const overrides: Record<string, string> = {};
  for (const pair of opts.set ?? []) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new Error(`--set expects key=value, got ${JSON.stringify(pair)}`);
    overrides[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  for (const k of Object.keys(overrides)) {
    if (!SETTING_NAMES.includes(k)) throw new Error(`--set: unknown setting ${JSON.stringify(k)}; known: ${SETTING_NAMES.join(", ")}`);
  }
  if (opts.listen) overrides.listen = opts.listen;
  if (opts.http) overrides.http = opts.http;
  if (opts.dataDir) overrides.data_dir = opts.dataDir;
  if (opts.logLevel) overrides.log_level = opts.logLevel;
  if (opts.logFormat) overrides.log_format = opts.logFormat;
  if (opts.clusterEtcd) overrides.cluster_etcd = opts.clusterEtcd;
  if (opts.clusterNats) overrides.cluster_nats = opts.clusterNats;
  if (opts.nodeId) overrides.node_id = opts.nodeId;
  if (opts.advertise) overrides.cluster_advertise = opts.advertise;
  const config = loadConfig({ ...(opts.config ? { file: opts.config } : {}), env: process.env, overrides });
  const logger = createLogger({ level: config.logLevel, format: config.logFormat, nodeId: config.nodeId });
  // A misspelt variable would otherwise be ignored without a word.
  for (const { variable, closest } of unknownEnvVars(process.env)) {
    logger.warn({ variable, closest }, `unknown environment variable ${variable} is ignored; did you mean ${closest}?`);
  }
  // Loaded here, so that `conveyord backup` and `--version` start without the server's modules.
  const { ConveyorNode } = await import("./server/node.js");
  const node = await ConveyorNode.start({ config, logger, security: { allowUnauthenticatedNetwork: opts.insecureAllowUnauthenticatedNetwork === true } });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping: draining in-flight calls");
    node.stop().then(() => process.exit(0), (err: unknown) => {
      logger.error({ err }, "error while stopping");
      process.exit(1);
    });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGHUP", () => node.reloadSecurity());
}

function withoutUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

program.parseAsync().catch((err: unknown) => {
  process.stderr.write(`conveyord: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
