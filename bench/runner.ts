/**
 * Runs one scenario with a context that owns every daemon, worker process and client
 * the scenario starts, and stops them all when it ends, even when it throws.
 */
import { Client } from "../src/index.js";
import { AdminClient } from "./admin.js";
import { Daemon, type DaemonOptions } from "./daemon.js";
import type { BenchOptions, ResultRow, Scenario, ScenarioContext } from "./scenario.js";
import { WorkerProcess } from "./worker-handle.js";

interface Owned {
  daemon: Daemon;
  workers: WorkerProcess[];
  clients: Client[];
  admin?: AdminClient;
}

export async function runScenario(scenario: Scenario, options: BenchOptions): Promise<ResultRow[]> {
  const owned = new Map<Daemon, Owned>();
  const ownerOf = (d: Daemon): Owned => {
    const o = owned.get(d);
    if (!o) throw new Error("daemon was not started by this scenario, or was already released");
    return o;
  };
  let lastProgress = 0;

  const release = async (daemon: Daemon) => {
    const o = owned.get(daemon);
    if (!o) return;
    owned.delete(daemon);
    const problems: unknown[] = [];
    await Promise.all(o.workers.map((w) => w.stop().catch((e: unknown) => problems.push(e))));
    for (const c of o.clients) c.close();
    o.admin?.close();
    await daemon.stop().catch((e: unknown) => problems.push(e));
    if (problems.length > 0) process.stderr.write(`bench: problems while stopping ${scenario.name}: ${problems.map(String).join("; ")}\n`);
  };

  const ctx: ScenarioContext = {
    options,
    progress(message, force = false) {
      const now = Date.now();
      if (!force && now - lastProgress < 1_000) return;
      lastProgress = now;
      process.stderr.write(`  ${message}\n`);
    },
    async daemon(o: DaemonOptions = {}) {
      const d = await Daemon.start({ ...o, settings: { ...options.settings, ...o.settings } });
      owned.set(d, { daemon: d, workers: [], clients: [] });
      return d;
    },
    async worker(daemon, config) {
      const o = ownerOf(daemon);
      const w = await WorkerProcess.start({ ...config, address: daemon.grpcAddress });
      o.workers.push(w);
      return w;
    },
    client(daemon) {
      const c = new Client({ address: daemon.grpcAddress, timeoutMs: 60_000 });
      ownerOf(daemon).clients.push(c);
      return c;
    },
    admin(daemon) {
      const o = ownerOf(daemon);
      return (o.admin ??= new AdminClient(daemon.grpcAddress));
    },
    release,
  };

  try {
    return await scenario.run(ctx);
  } catch (error) {
    const logs = [...owned.keys()].map((d) => `--- conveyord ${d.grpcAddress} (pid ${d.pid}, ${d.alive ? "alive" : "exited"}) last log lines:\n${d.logs()}`);
    if (logs.length > 0 && error instanceof Error) error.message += `\n${logs.join("\n")}`;
    throw error;
  } finally {
    for (const d of [...owned.keys()].reverse()) await release(d);
  }
}
