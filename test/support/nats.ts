/**
 * Real nats-server (JetStream, file storage) for the changelog tests: one server, or a
 * cluster of three with routes between them, on free 127.0.0.1 ports with temp store dirs.
 * Ready means every server's monitoring port answers /healthz with "ok" and, for a
 * cluster, every server's /jsz names the same JetStream meta leader (polled, bounded):
 * before that a stream cannot be created. Stopping kills by PID and waits for the exit.
 *
 * The binary is Debian's nats-server 2.9.10, unpacked (never installed, so its system
 * service never starts) into .cache/apt/nats-server by scripts/test-prerequisites.mjs,
 * which `npm test` runs first. NATS_BIN overrides the path. A missing binary fails the
 * test with what to run; it never skips.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./etcd.js";
import { eventually, REPO_ROOT } from "./node-process.js";
import { portTaken, PortTakenError, startOnFreshPorts } from "./port-race.js";
import { LOOPBACK, ServerProcess, spawnOn, type ProcessHost } from "./server-process.js";

const CACHED_BIN = join(REPO_ROOT, ".cache/apt/nats-server/usr/sbin/nats-server");

/** The nats-server binary, or an error that says how to get it. */
export function natsBinary(): string {
  const candidates = [process.env.NATS_BIN, CACHED_BIN, "/usr/sbin/nats-server", "/usr/bin/nats-server"].filter((p): p is string => !!p);
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new Error(`no nats-server binary (looked at ${candidates.join(", ")}): run \`node scripts/test-prerequisites.mjs\` ` +
      "(fetches Debian's nats-server into .cache/apt without starting its service) or set NATS_BIN");
  }
  return found;
}

/** What /jsz reports about the JetStream meta group (absent on a single server). */
interface Jsz {
  meta_cluster?: { leader?: string; cluster_size?: number };
}

/** One nats-server process. */
export class NatsServer extends ServerProcess {
  constructor(
    readonly name: string,
    readonly port: number,
    readonly monitorPort: number,
    readonly configFile: string,
    bin: string,
    readonly host: ProcessHost = LOOPBACK,
  ) {
    super(spawnOn(host, bin, ["-c", configFile]));
  }

  /** The client URL (`nats://<address>:<port>`). */
  get url(): string {
    return `nats://${this.host.address}:${this.port}`;
  }

  /** /healthz answers "ok": the server is up and its JetStream is current. */
  async healthy(): Promise<boolean> {
    try {
      const res = await fetch(`http://${this.host.address}:${this.monitorPort}/healthz`, { signal: AbortSignal.timeout(1_000) });
      return res.ok && ((await res.json()) as { status?: string }).status === "ok";
    } catch {
      return false;
    }
  }

  /** The JetStream meta leader's server name as this server sees it ("" if none yet). */
  async metaLeader(): Promise<string> {
    try {
      const res = await fetch(`http://${this.host.address}:${this.monitorPort}/jsz`, { signal: AbortSignal.timeout(1_000) });
      return ((await res.json()) as Jsz).meta_cluster?.leader ?? "";
    } catch {
      return "";
    }
  }

  /** The server that leads `stream` as this server sees it ("" if none or unknown). */
  async streamLeader(stream: string): Promise<string> {
    try {
      const res = await fetch(`http://${this.host.address}:${this.monitorPort}/jsz?streams=true`, { signal: AbortSignal.timeout(1_000) });
      const body = (await res.json()) as { account_details?: Array<{ stream_detail?: Array<{ name: string; cluster?: { leader?: string } }> }> };
      return body.account_details?.flatMap((a) => a.stream_detail ?? []).find((d) => d.name === stream)?.cluster?.leader ?? "";
    } catch {
      return "";
    }
  }
}

/** A running nats-server: one server or a cluster. */
export class NatsCluster {
  constructor(readonly servers: NatsServer[], private readonly root: string) {}

  /** Client URLs (every server; a client picks one and fails over to the others). */
  get urls(): string[] {
    return this.servers.map((s) => s.url);
  }

  server(name: string): NatsServer {
    const found = this.servers.find((s) => s.name === name);
    if (!found) throw new Error(`no nats-server named ${name} (have ${this.servers.map((s) => s.name).join(", ")})`);
    return found;
  }

  /** Resolves once every running server is healthy and (in a cluster) agrees on a meta leader. */
  async ready(timeoutMs = 30_000): Promise<void> {
    const clustered = this.servers.length > 1;
    await eventually(`nats-server (${this.servers.length}) healthy${clustered ? " with a JetStream meta leader" : ""}`, async () => {
      const up = this.servers.filter((s) => s.running);
      if (up.length === 0) throw new Error("no nats-server running");
      const health = await Promise.all(up.map((s) => s.healthy()));
      if (!health.every(Boolean)) return undefined;
      if (!clustered) return true;
      const leaders = await Promise.all(up.map((s) => s.metaLeader()));
      return leaders[0] !== "" && leaders.every((l) => l === leaders[0]) ? true : undefined;
    }, timeoutMs);
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.stop()));
    rmSync(this.root, { recursive: true, force: true });
  }
}

export interface NatsOptions {
  /** Servers (1 or 3 in practice). */
  size?: number;
  /** Bound on start-up until every server is ready. */
  readyTimeoutMs?: number;
  /** Each server's max_payload (default 8MB, what the changelog needs). */
  maxPayload?: string;
  /**
   * Where each server runs (one per server; `size` is then their count): server i binds
   * hosts[i].address on NATS' own ports (4222 clients, 6222 routes, 8222 monitoring), under
   * its prefix (a network namespace of its own, netns.ts). Default: free loopback ports.
   */
  hosts?: readonly ProcessHost[];
}

/** Starts nats-server with JetStream on `size` servers on free loopback ports; resolves once ready. */
export function startNats(options: NatsOptions = {}): Promise<NatsCluster> {
  return startOnFreshPorts(() => startNatsOnce(options));
}

async function startNatsOnce(options: NatsOptions): Promise<NatsCluster> {
  const size = options.hosts?.length ?? options.size ?? 1;
  const bin = natsBinary();
  const root = mkdtempSync(join(tmpdir(), "conveyor-nats-"));
  const spec: Array<{ name: string; port: number; monitor: number; route: number; host: ProcessHost }> = [];
  for (let i = 0; i < size; i++) {
    const host = options.hosts?.[i];
    spec.push(host
      ? { name: `n${i}`, port: 4222, monitor: 8222, route: 6222, host }
      : { name: `n${i}`, port: await freePort(), monitor: await freePort(), route: await freePort(), host: LOOPBACK });
  }
  const servers = spec.map((s) => {
    const storeDir = join(root, s.name);
    mkdirSync(storeDir, { recursive: true });
    const lines = [
      `server_name: ${s.name}`,
      `listen: "${s.host.address}:${s.port}"`,
      `http: "${s.host.address}:${s.monitor}"`,
      // Bounded so that three servers and a test fit a small machine.
      `jetstream { store_dir: "${storeDir}", max_memory_store: 64MB, max_file_store: 1GB }`,
      // The changelog's requirement (changelog.ts, NATS_MAX_PAYLOAD_REQUIRED).
      `max_payload: ${options.maxPayload ?? "8MB"}`,
    ];
    if (size > 1) {
      const routes = spec.filter((o) => o !== s).map((o) => `"nats-route://${o.host.address}:${o.route}"`);
      lines.push(`cluster { name: "cv-test", listen: "${s.host.address}:${s.route}", routes: [${routes.join(", ")}] }`);
    }
    const configFile = join(root, `${s.name}.conf`);
    writeFileSync(configFile, `${lines.join("\n")}\n`);
    return new NatsServer(s.name, s.port, s.monitor, configFile, bin, s.host);
  });
  const cluster = new NatsCluster(servers, root);
  try {
    await cluster.ready(options.readyTimeoutMs ?? 30_000);
    // ready() waits for the running servers; at start every one must run.
    const exited = servers.find((s) => !s.running);
    if (exited) {
      await exited.whenExited();
      throw new Error(`nats-server ${exited.name} exited at start`);
    }
  } catch (err) {
    await cluster.stop();
    const log = servers.map((s) => `${s.name}: ${s.output.slice(-2_000)}`).join("\n");
    const message = `${err instanceof Error ? err.message : String(err)}\n${log}`;
    throw servers.some((s) => portTaken(s.output)) ? new PortTakenError(message) : new Error(message);
  }
  return cluster;
}
