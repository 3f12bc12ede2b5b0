/**
 * Network namespaces for the network fault tests (issue 14, tests 4 and 5): a *lab* of
 * hosts, each a network namespace of its own with one address on a private /24, so that
 * nftables rules in one host's namespace cut exactly that host off, or drop a share of
 * its packets, while the test process (the SDK clients) stays in the root namespace.
 * Needs root (namespaces, veths, nft) and the `nft` binary (Debian's nftables,
 * .ci/apt-packages); `netnsUnavailable()` says why it cannot run here.
 *
 * Topology of one lab (o: the subnet's third octet, free on this machine):
 *
 *     root ns: veth cvl<pid>-<n>r 10.77.o.1/24  (the gateway: the test's clients)
 *        │ peer "uplink"
 *     hub ns cvlab-<pid>-<n>-hub: bridge br0 (no address)
 *        │ port h<i>, peer "eth0"
 *     host ns cvlab-<pid>-<n>-<name>: eth0 10.77.o.(11+i)/24, lo
 *
 * The bridge is in a namespace of its own, not in the root's: the root namespace's
 * firewall (Docker sets iptables' FORWARD policy to DROP, and with br_netfilter bridged
 * frames pass through it) never sees the hosts' traffic; the root only sends and
 * receives the test's own. Servers run with `ip netns exec <ns> ...` (`host.prefix`;
 * `ip` execs, so the child's pid is the server's): etcd, nats-server and conveyord take
 * that prefix and the host's address (etcd.ts, nats.ts, node-process.ts).
 *
 * Faults are one nftables table (`inet conveyor_fault`) in a host's own namespace, on
 * eth0 only, so traffic inside the host (a node and the etcd member and nats-server on
 * the same host, over lo) and traffic with the gateway (the test's clients) is never
 * touched:
 * - `cut(host)`: every packet to or from another host is dropped (a network partition of
 *   that host from all the others; its clients still reach it);
 * - `loss(host, percent)`: that share of the packets it sends to other hosts is dropped
 *   (`numgen random mod 100 < percent`); with loss on every host each packet between two
 *   hosts is dropped with that probability, once (on its way out);
 * - `heal(host)`: the table goes. `counters(host)` reads what the rules saw and dropped.
 *
 * Clean-up: `stop()` kills what still runs in the lab's namespaces (only processes started
 * there, by this fixture), deletes them (which deletes their veths) and frees the subnet.
 * Every name carries the creating process's pid; a new lab first removes the namespaces,
 * links and subnet claims of labs whose process is gone (an interrupted run), so leftovers
 * never break the next run, and never touches a live process's lab.
 */
import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ProcessHost } from "./server-process.js";

/** Where subnet claims live: one file per third octet of 10.77.0.0/16, naming its lab. */
const CLAIMS = "/run/conveyor-netlab";
const NS_PREFIX = "cvlab-";
const LINK_PREFIX = "cvl";
const TABLE = "conveyor_fault";
/** A lab's namespace: cvlab-<pid>-<seq>-<host>. */
const NS_NAME = /^cvlab-(\d+)-(\d+)-/;
/** A lab's root-side veth: cvl<pid base 36>-<seq base 36>r. */
const LINK_NAME = /^cvl([0-9a-z]+)-([0-9a-z]+)r$/;

/** One host of a lab. */
export interface NetHost extends ProcessHost {
  readonly name: string;
  /** Its network namespace. */
  readonly ns: string;
}

/** What a host's fault rules saw: packets to other hosts, and those dropped (by cut or loss). */
export interface FaultCounters {
  sent: number;
  dropped: number;
}

/** Labs of this process that are alive (their namespaces are not leftovers). */
const liveLabs = new Set<number>();
let nextSeq = 0;

/** Why the lab cannot run on this machine, or undefined when it can (checked once, cheaply). */
export function netnsUnavailable(): string | undefined {
  if (process.platform !== "linux") return "network namespaces need Linux";
  if (process.getuid?.() !== 0) return "network namespaces and nftables need root";
  return undefined;
}

export class NetLab {
  private stopped = false;

  private constructor(
    private readonly seq: number,
    private readonly octet: number,
    private readonly hubNs: string,
    private readonly uplink: string,
    readonly hosts: ReadonlyMap<string, NetHost>,
  ) {}

  /** The root namespace's address on the lab's network: where the test's clients are. */
  get gateway(): string {
    return `10.77.${this.octet}.1`;
  }

  /** Creates the hub, one namespace per name and the links; removes stale labs first. */
  static async create(names: readonly string[]): Promise<NetLab> {
    const why = netnsUnavailable();
    if (why) throw new Error(why);
    if (names.length === 0 || names.length > 200) throw new Error(`a lab has 1-200 hosts, not ${names.length}`);
    await removeStale();
    const seq = nextSeq++;
    liveLabs.add(seq);
    const octet = await claimSubnet(seq);
    const tag = `${process.pid}-${seq}`;
    const hubNs = `${NS_PREFIX}${tag}-hub`;
    const uplink = `${LINK_PREFIX}${process.pid.toString(36)}-${seq.toString(36)}r`;
    const hosts = new Map(names.map((name, i) => {
      const ns = `${NS_PREFIX}${tag}-${name}`;
      return [name, { name, ns, address: `10.77.${octet}.${11 + i}`, prefix: ["ip", "netns", "exec", ns] }] as const;
    }));
    const lab = new NetLab(seq, octet, hubNs, uplink, hosts);
    try {
      await ip("netns", "add", hubNs);
      await ip("-n", hubNs, "link", "set", "lo", "up");
      await ip("-n", hubNs, "link", "add", "br0", "type", "bridge");
      await ip("-n", hubNs, "link", "set", "br0", "up");
      await ip("link", "add", uplink, "type", "veth", "peer", "name", "uplink", "netns", hubNs);
      await ip("-n", hubNs, "link", "set", "uplink", "master", "br0", "up");
      await ip("addr", "add", `${lab.gateway}/24`, "dev", uplink);
      await ip("link", "set", uplink, "up");
      let i = 0;
      for (const host of hosts.values()) {
        const port = `h${i++}`;
        await ip("netns", "add", host.ns);
        await ip("-n", host.ns, "link", "set", "lo", "up");
        await ip("-n", hubNs, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host.ns);
        await ip("-n", hubNs, "link", "set", port, "master", "br0", "up");
        await ip("-n", host.ns, "addr", "add", `${host.address}/24`, "dev", "eth0");
        await ip("-n", host.ns, "link", "set", "eth0", "up");
      }
    } catch (error) {
      await lab.stop();
      throw error;
    }
    return lab;
  }

  host(name: string): NetHost {
    const host = this.hosts.get(name);
    if (!host) throw new Error(`no host ${name} in the lab (have ${[...this.hosts.keys()].join(", ")})`);
    return host;
  }

  /** Drops every packet between `name` and the other hosts (both ways); the gateway still reaches it. */
  cut(name: string): Promise<void> {
    const gw = this.gateway;
    return this.rules(name, [
      `chain input { type filter hook input priority 0; policy accept;`,
      `  iifname "eth0" meta nfproto ipv6 drop;`,
      `  iifname "eth0" ip saddr != ${gw} counter drop; }`,
      `chain output { type filter hook output priority 0; policy accept;`,
      `  oifname "eth0" meta nfproto ipv6 drop;`,
      `  oifname "eth0" ip daddr != ${gw} counter drop; }`,
    ]);
  }

  /** Drops `percent` % of the packets `name` sends to the other hosts, at random. */
  loss(name: string, percent: number): Promise<void> {
    if (!Number.isInteger(percent) || percent < 1 || percent > 100) throw new Error(`loss is 1-100 %, not ${percent}`);
    const gw = this.gateway;
    return this.rules(name, [
      `chain output { type filter hook output priority 0; policy accept;`,
      `  oifname "eth0" ip daddr != ${gw} counter;`,
      `  oifname "eth0" ip daddr != ${gw} numgen random mod 100 < ${percent} counter drop; }`,
    ]);
  }

  /** Removes `name`'s fault rules (none is fine). */
  async heal(name: string): Promise<void> {
    await nft(this.host(name), `add table inet ${TABLE}\ndelete table inet ${TABLE}\n`);
  }

  /**
   * What `name`'s rules counted since they were set: packets sent to other hosts (loss
   * only; 0 for a cut) and packets dropped.
   */
  async counters(name: string): Promise<FaultCounters> {
    const out = await run(["ip", "netns", "exec", this.host(name).ns, "nft", "-j", "list", "table", "inet", TABLE]);
    const rules = (JSON.parse(out) as { nftables: Array<{ rule?: { chain: string; expr: Array<Record<string, unknown>> } }> }).nftables
      .flatMap((e) => (e.rule ? [e.rule] : []));
    const counts = { sent: 0, dropped: 0 };
    for (const rule of rules) {
      const counter = rule.expr.find((x) => "counter" in x)?.counter as { packets: number } | undefined;
      if (!counter) continue;
      if (rule.expr.some((x) => "drop" in x)) counts.dropped += counter.packets;
      else counts.sent += counter.packets;
    }
    return counts;
  }

  /** Kills what still runs in the lab's namespaces, deletes them and frees the subnet. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await removeNamespaces([...[...this.hosts.values()].map((h) => h.ns), this.hubNs]);
    await ip("link", "del", this.uplink).catch(() => undefined); // gone with the hub's end
    rmSync(join(CLAIMS, String(this.octet)), { force: true });
    liveLabs.delete(this.seq);
  }

  /** Replaces `name`'s fault table with `chains`, atomically (one nft transaction). */
  private async rules(name: string, chains: string[]): Promise<void> {
    await nft(this.host(name), `add table inet ${TABLE}\ndelete table inet ${TABLE}\ntable inet ${TABLE} {\n${chains.join("\n")}\n}\n`);
  }
}

/** Process options that run a conveyord on `host`: its namespace, its address, and the flag an address beyond loopback needs. */
export function onHost(host: NetHost): { prefix: readonly string[]; host: string; args: readonly string[] } {
  // The lab's network is private to this machine; the nodes run without authentication.
  return { prefix: host.prefix, host: host.address, args: ["--insecure-allow-unauthenticated-network"] };
}

/** Claims a free third octet of 10.77.0.0/16 (a file created exclusively), not used by any address here. */
async function claimSubnet(seq: number): Promise<number> {
  mkdirSync(CLAIMS, { recursive: true });
  const used = await run(["ip", "-4", "-o", "addr", "show"]);
  for (let k = 0; k < 254; k++) {
    const octet = 1 + ((process.pid + k) % 254);
    if (used.includes(` 10.77.${octet}.`)) continue;
    try {
      writeFileSync(join(CLAIMS, String(octet)), `${process.pid} ${seq}\n`, { flag: "wx" });
      return octet;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
  throw new Error(`no free 10.77.x.0/24 subnet (claims in ${CLAIMS})`);
}

/** Is `pid` a lab of a process that is gone, or of this process but not alive? */
function stale(pid: number, seq: number): boolean {
  if (pid === process.pid) return !liveLabs.has(seq);
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/** Removes the namespaces, root links and subnet claims of labs whose process is gone. */
async function removeStale(): Promise<void> {
  const listed = await run(["ip", "-j", "netns", "list"]);
  const namespaces = listed.trim() ? (JSON.parse(listed) as Array<{ name: string }>).map((n) => n.name) : [];
  await removeNamespaces(namespaces.filter((name) => {
    const m = NS_NAME.exec(name);
    return m !== null && stale(Number(m[1]), Number(m[2]));
  }));
  const links = JSON.parse(await run(["ip", "-j", "link", "show"])) as Array<{ ifname: string }>;
  for (const { ifname } of links) {
    const m = LINK_NAME.exec(ifname);
    if (m && stale(parseInt(m[1]!, 36), parseInt(m[2]!, 36))) await ip("link", "del", ifname).catch(() => undefined);
  }
  mkdirSync(CLAIMS, { recursive: true });
  for (const file of readdirSync(CLAIMS)) {
    const [pid, seq] = readFileSync(join(CLAIMS, file), "utf8").trim().split(" ").map(Number);
    if (stale(pid!, seq!)) rmSync(join(CLAIMS, file), { force: true });
  }
}

/**
 * Kills every process in `namespaces` (started there by a lab: a server left by a failed
 * test or an interrupted run), waits until they are gone, then deletes the namespaces
 * (a namespace with a process in it would live on, unnamed, with its veth).
 */
async function removeNamespaces(namespaces: string[]): Promise<void> {
  const inside = async (ns: string) => (await run(["ip", "netns", "pids", ns]).catch(() => "")).split(/\s+/).filter(Boolean).map(Number);
  for (const ns of namespaces) {
    for (const pid of await inside(ns)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
    }
  }
  for (const ns of namespaces) {
    const giveUpAt = Date.now() + 10_000;
    while ((await inside(ns)).length > 0) {
      if (Date.now() > giveUpAt) throw new Error(`processes in ${ns} did not exit after SIGKILL: ${(await inside(ns)).join(", ")}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    await ip("netns", "del", ns).catch(() => undefined);
  }
}

function ip(...args: string[]): Promise<string> {
  return run(["ip", ...args]);
}

async function nft(host: NetHost, script: string): Promise<void> {
  await run(["ip", "netns", "exec", host.ns, "nft", "-f", "-"], script);
}

/** Runs a command; resolves to its stdout, rejects naming it and its stderr. */
function run(argv: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    child.once("error", (e) => reject(new Error(`${argv.join(" ")}: ${e.message}${e.message.includes("ENOENT") ? " (is it installed? nft: apt-get install nftables)" : ""}`)));
    child.once("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`${argv.join(" ")} exited with ${code}: ${err.trim()}`))));
    if (input !== undefined) {
      child.stdin!.on("error", () => undefined); // an early exit is reported by "close"
      child.stdin!.end(input);
    }
  });
}
