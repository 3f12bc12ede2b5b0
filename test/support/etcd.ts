/**
 * Real etcd servers for the cluster tests: one member, or a cluster of three, on free
 * 127.0.0.1 ports with temp data dirs. Ready means every member's /health answers
 * {"health":"true"} (polled, bounded); stopping kills by PID and waits for the exit.
 *
 * The binary is Debian's etcd-server 3.4.23, unpacked (never installed, so its system
 * service never starts) into .cache/apt/etcd-server by scripts/test-prerequisites.mjs,
 * which `npm test` runs first. ETCD_BIN overrides the path. A missing binary fails the
 * test with what to run; it never skips.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually, REPO_ROOT } from "./node-process.js";
import { portTaken, PortTakenError, startOnFreshPorts } from "./port-race.js";
import { LOOPBACK, ServerProcess, spawnOn, type ProcessHost } from "./server-process.js";

const CACHED_BIN = join(REPO_ROOT, ".cache/apt/etcd-server/usr/bin/etcd");

/** The etcd binary, or an error that says how to get it. */
export function etcdBinary(): string {
  const candidates = [process.env.ETCD_BIN, CACHED_BIN, "/usr/bin/etcd"].filter((p): p is string => !!p);
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new Error(`no etcd binary (looked at ${candidates.join(", ")}): run \`node scripts/test-prerequisites.mjs\` ` +
      "(fetches Debian's etcd-server into .cache/apt without starting its service) or set ETCD_BIN");
  }
  return found;
}

/** A port that was free a moment ago (bound to 127.0.0.1:0 and released). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** One etcd process. */
export class EtcdMember extends ServerProcess {
  constructor(
    readonly name: string, readonly clientUrl: string, readonly peerUrl: string, readonly dataDir: string, child: ChildProcess,
    private readonly spawnAgain: () => ChildProcess = () => { throw new Error(`etcd ${name} cannot be started again`); },
  ) {
    super(child);
  }

  /** The same member started again (same data dir, same ports) once this process has exited; resolves once it is healthy. */
  async restarted(readyTimeoutMs = 30_000): Promise<EtcdMember> {
    if (this.running) throw new Error(`etcd ${this.name} is still running`);
    const again = new EtcdMember(this.name, this.clientUrl, this.peerUrl, this.dataDir, this.spawnAgain(), this.spawnAgain);
    await eventually(`etcd ${this.name} healthy again`, async () => {
      if (!again.running) throw new Error(`etcd ${this.name} exited: ${again.output}`);
      return (await again.healthy()) ? true : undefined;
    }, readyTimeoutMs);
    return again;
  }

  async healthy(): Promise<boolean> {
    try {
      const res = await fetch(`${this.clientUrl}/health`, { signal: AbortSignal.timeout(1_000) });
      const body = (await res.json()) as { health?: string };
      return body.health === "true";
    } catch {
      return false;
    }
  }
}

/** A running etcd: one member or several. */
export class EtcdCluster {
  constructor(readonly members: EtcdMember[], private readonly root: string) {}

  /** Starts member `index` again after it was killed (same data dir and ports); resolves once it is healthy. */
  async restart(index: number): Promise<EtcdMember> {
    const member = await this.members[index]!.restarted();
    this.members[index] = member;
    return member;
  }

  /** Client endpoints, comma-separated (the form `cluster_etcd` takes). */
  get endpoints(): string {
    return this.members.map((m) => m.clientUrl).join(",");
  }

  get hosts(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  /**
   * The member that is raft leader now, by etcd's maintenance status API (each member
   * names itself and the leader by member id); undefined while no running member knows one.
   */
  async leader(): Promise<EtcdMember | undefined> {
    const statuses = await Promise.all(this.members.filter((m) => m.running).map(async (m) => {
      try {
        const res = await fetch(`${m.clientUrl}/v3/maintenance/status`, { method: "POST", body: "{}", signal: AbortSignal.timeout(1_000) });
        const body = (await res.json()) as { header?: { member_id?: string }; leader?: string };
        return { member: m, id: body.header?.member_id, leader: body.leader };
      } catch {
        return undefined;
      }
    }));
    const known = statuses.filter((s) => s !== undefined);
    const leaderId = known.find((s) => s.leader && s.leader !== "0")?.leader;
    return known.find((s) => s.id === leaderId)?.member;
  }

  async stop(): Promise<void> {
    await Promise.all(this.members.map((m) => m.stop()));
    rmSync(this.root, { recursive: true, force: true });
  }
}

export interface EtcdOptions {
  /** Members (1 or 3 in practice). */
  size?: number;
  /** Bound on start-up until every member is healthy. */
  readyTimeoutMs?: number;
  /**
   * Where each member runs (one per member; `size` is then their count): member i binds
   * hosts[i].address on etcd's own ports 2379/2380, under its prefix (a network namespace
   * of its own, netns.ts, so fixed ports never collide). Default: free loopback ports.
   */
  hosts?: readonly ProcessHost[];
  /**
   * etcd's `--pre-vote` (default here true, as deploy/ runs etcd; etcd 3.4's own default
   * is off): a member cut off and back does not depose the leader. Without it, a member
   * returning from a network partition forced an election (its term had grown), which
   * once left the nodes' keep-alives unanswered for 4.1 s, past their 3.75 s fence.
   */
  preVote?: boolean;
}

/** Starts etcd with `size` members on free loopback ports; resolves once all are healthy. */
export function startEtcd(options: EtcdOptions = {}): Promise<EtcdCluster> {
  return startOnFreshPorts(() => startEtcdOnce(options));
}

async function startEtcdOnce(options: EtcdOptions): Promise<EtcdCluster> {
  const size = options.hosts?.length ?? options.size ?? 1;
  const bin = etcdBinary();
  const root = mkdtempSync(join(tmpdir(), "conveyor-etcd-"));
  const spec: Array<{ name: string; client: string; peer: string; host: ProcessHost }> = [];
  for (let i = 0; i < size; i++) {
    const host = options.hosts?.[i];
    spec.push(host
      ? { name: `e${i}`, client: `http://${host.address}:2379`, peer: `http://${host.address}:2380`, host }
      : { name: `e${i}`, client: `http://127.0.0.1:${await freePort()}`, peer: `http://127.0.0.1:${await freePort()}`, host: LOOPBACK });
  }
  const initialCluster = spec.map((s) => `${s.name}=${s.peer}`).join(",");
  const token = `conveyor-test-${process.pid}-${Date.now()}`;
  const members = spec.map((s) => {
    const dataDir = join(root, s.name);
    const spawnMember = () => spawnOn(s.host, bin, [
      "--name", s.name, "--data-dir", dataDir,
      "--listen-client-urls", s.client, "--advertise-client-urls", s.client,
      "--listen-peer-urls", s.peer, "--initial-advertise-peer-urls", s.peer,
      "--initial-cluster", initialCluster, "--initial-cluster-state", "new", "--initial-cluster-token", token,
      "--logger", "zap", "--log-level", "warn",
      ...(options.preVote ?? true ? ["--pre-vote"] : []),
    ]);
    return new EtcdMember(s.name, s.client, s.peer, dataDir, spawnMember(), spawnMember);
  });
  const cluster = new EtcdCluster(members, root);
  try {
    // A member that exits ends the wait at once (it will not come back by itself).
    const dead = await eventually(`etcd (${size} member(s)) healthy`, async () => {
      const exited = members.find((m) => !m.running);
      if (exited) return exited;
      const health = await Promise.all(members.map((m) => m.healthy()));
      return health.every(Boolean) ? null : undefined;
      // A bound, not a wait: three members in network namespaces, started beside another
      // cluster test on the 2 cores, once took more than 20 s to elect a leader in CI.
    }, options.readyTimeoutMs ?? 60_000);
    if (dead) {
      await dead.whenExited();
      const message = `etcd ${dead.name} exited: ${dead.output}`;
      throw portTaken(dead.output) ? new PortTakenError(message) : new Error(message);
    }
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}
