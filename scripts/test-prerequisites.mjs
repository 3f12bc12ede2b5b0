#!/usr/bin/env node
/**
 * Runs before `npm test`: makes sure the machine has what the suite needs beyond npm
 * packages, so `npm ci && npm test` works on a fresh Debian machine.
 *
 * Today that is Debian's Chromium for the dashboard's browser tests, and Python 3 with
 * grpcio, protobuf, protoc, grpc_python_plugin and pytest for the Python SDK (sdks/python,
 * run by `npm run test:python` with /usr/bin/python3). When one is missing
 * and this process may install Debian packages (root, or password-less sudo), it installs
 * the packages listed in .ci/apt-packages with apt-get, without starting any system
 * service. Otherwise it stops the run with one line that says what to install and how.
 * Set CONVEYOR_SKIP_PREREQUISITES=1 to skip the check (the browser and Python tests then fail).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** The file each Debian package must provide for the suite. */
const NEEDS = {
  chromium: "/usr/bin/chromium",
  "python3-grpcio": "/usr/lib/python3/dist-packages/grpc/__init__.py",
  "python3-protobuf": "/usr/lib/python3/dist-packages/google/protobuf/__init__.py",
  "python3-pytest": "/usr/lib/python3/dist-packages/pytest/__init__.py",
  "protobuf-compiler": "/usr/bin/protoc",
  "protobuf-compiler-grpc": "/usr/bin/grpc_python_plugin",
};

if (process.env.CONVEYOR_SKIP_PREREQUISITES === "1") process.exit(0);

const listed = readFileSync(join(root, ".ci/apt-packages"), "utf8").split(/\s+/).filter(Boolean);
const missing = listed.filter((pkg) => !isInstalled(pkg));
if (missing.length === 0) process.exit(0);

const how = `apt-get install -y ${missing.join(" ")}`;
const asRoot = process.getuid?.() === 0;
const sudo = !asRoot && spawnSync("sudo", ["-n", "true"], { stdio: "ignore" }).status === 0;
if (!existsSync("/usr/bin/apt-get") || (!asRoot && !sudo)) {
  console.error(`test prerequisites: missing Debian package(s) ${missing.join(", ")}; install them with: sudo ${how}`);
  process.exit(1);
}

console.error(`test prerequisites: installing ${missing.join(", ")} with apt-get (about a minute)…`);
const prefix = asRoot ? [] : ["sudo", "-n"];
const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
// A policy-rc.d that exits 101 is Debian's way of saying "start no service" while packages
// install (etcd-server and nats-server would otherwise start system-wide daemons); the suite
// starts its own servers. Only a policy we wrote ourselves is removed afterwards.
const POLICY = "/usr/sbin/policy-rc.d";
const ownPolicy = !existsSync(POLICY);
try {
  if (ownPolicy) run([...prefix, "sh", "-c", `printf '#!/bin/sh\\nexit 101\\n' > ${POLICY} && chmod +x ${POLICY}`], env);
  run([...prefix, "apt-get", "update", "-qq"], env);
  run([...prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends", ...missing], env);
} catch {
  console.error(`test prerequisites: apt-get failed; install them by hand with: sudo ${how}`);
  process.exit(1);
} finally {
  if (ownPolicy) spawnSync(prefix[0] ?? "rm", prefix.length ? [...prefix.slice(1), "rm", "-f", POLICY] : ["-f", POLICY]);
}
const stillMissing = missing.filter((pkg) => !isInstalled(pkg));
if (stillMissing.length > 0) {
  console.error(`test prerequisites: ${stillMissing.join(", ")} still missing after apt-get; install by hand with: sudo ${how}`);
  process.exit(1);
}
console.error("test prerequisites: installed");

function isInstalled(pkg) {
  const file = NEEDS[pkg];
  if (file) return existsSync(file);
  return spawnSync("dpkg", ["-s", pkg], { stdio: "ignore" }).status === 0;
}

function run(argv, env) {
  execFileSync(argv[0], argv.slice(1), { env, stdio: ["ignore", "ignore", "inherit"] });
}
