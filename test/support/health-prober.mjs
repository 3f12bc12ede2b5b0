/**
 * Probes a node's GET /healthz back to back until told to stop (a line on stdin), then
 * prints one JSON line: every probe's start and end (epoch ms) and "blocked" time.
 *
 * Wall latency alone measures the machine as much as the node: on a shared 2-core box a
 * runnable process can wait tens of milliseconds for a core. So each probe also reads
 * how much CPU the node's main thread (the event loop) used while the probe waited
 * (/proc/<pid>/task/<pid>/schedstat, nanoseconds). A probe was held up by the node's
 * own work only as long as that thread was running, so min(wall, cpu) is the time the
 * event loop kept the probe waiting; descheduling by other processes does not count.
 * Without /proc (not Linux) it falls back to wall latency.
 *
 * Usage: node health-prober.mjs <http host:port> <node pid>
 */
import { readFileSync } from "node:fs";
import http from "node:http";

const [address, pidText] = process.argv.slice(2);
const statPath = `/proc/${pidText}/task/${pidText}/schedstat`;
let hasCpu = true;
const cpuMs = () => {
  if (!hasCpu) return Infinity;
  try {
    return Number(readFileSync(statPath, "utf8").split(" ")[0]) / 1e6;
  } catch {
    hasCpu = false;
    return Infinity;
  }
};
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];

function probe() {
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port, path: "/healthz", agent }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`healthz answered ${res.statusCode}`))));
    });
    req.on("error", reject);
  });
}

let stopping = false;
process.stdin.on("data", () => (stopping = true));
const stats = { probes: [], failures: 0, cpuMeasured: true, lastError: "" };
const epochMs = () => performance.timeOrigin + performance.now();
// Tell the parent the first probe has been answered (the loop is running).
let announced = false;
while (!stopping) {
  const c0 = cpuMs();
  const startMs = epochMs();
  const t0 = performance.now();
  try {
    await probe();
  } catch (e) {
    stats.failures += 1;
    stats.lastError = String(e);
  }
  const wall = performance.now() - t0;
  const c1 = cpuMs();
  const cpu = hasCpu ? c1 - c0 : Infinity;
  stats.probes.push({ startMs, endMs: startMs + wall, wallMs: wall, blockedMs: Math.min(wall, cpu) });
  if (!announced) {
    announced = true;
    process.stdout.write("ready\n");
  }
}
stats.cpuMeasured = hasCpu;
process.stdout.write(JSON.stringify(stats) + "\n");
agent.destroy();
