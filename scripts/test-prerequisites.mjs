#!/usr/bin/env node
/**
 * Runs before `npm test`: makes sure the machine has what the suite needs beyond npm
 * packages, so `npm ci && npm test` works on a fresh Debian machine.
 *
 * Two lists, two ways:
 * - .ci/apt-packages (Debian's Chromium for the dashboard's browser tests; Python 3 with
 *   grpcio, protobuf, protoc, grpc_python_plugin and pytest for the Python SDK, run by
 *   `npm run test:python` with /usr/bin/python3; iproute2 and nftables for the network
 *   fault tests, which need root and are skipped without it, so a run that is not root
 *   does not ask for those two) are installed
 *   with apt-get when missing and this process may install Debian packages (root, or
 *   password-less sudo), without starting any system service. Otherwise it stops the run
 *   with one line that says what to install and how.
 * - .ci/apt-extract (etcd-server and nats-server for the cluster tests) are never installed: each is
 *   fetched with `apt-get download` and unpacked with `dpkg -x` into .cache/apt/<package>/
 *   (git-ignored), so no maintainer script runs and no system service (etcd or NATS on
 *   their default ports) ever starts; the tests start their own servers from there
 *   (test/support/etcd.ts, test/support/nats.ts). This needs no root, only Debian's package lists.
 * Set CONVEYOR_SKIP_PREREQUISITES=1 to skip both (the tests that need them then fail).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
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
  nftables: "/usr/sbin/nft",
};
/** Packages only root's runs use (test/cluster/network-faults.test.ts: namespaces, veths, nft rules). */
const ROOT_ONLY = new Set(["iproute2", "nftables"]);

if (process.env.CONVEYOR_SKIP_PREREQUISITES === "1") process.exit(0);

const asRoot = process.getuid?.() === 0;
extractListed();
installListed();

/** Installs the packages of .ci/apt-packages that are missing (exits the process on failure). */
function installListed() {
  const listed = readList(".ci/apt-packages").filter((pkg) => asRoot || !ROOT_ONLY.has(pkg));
  const missing = listed.filter((pkg) => !isInstalled(pkg));
  if (missing.length === 0) return;

  const how = `apt-get install -y ${missing.join(" ")}`;
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
}

/**
 * Fetches and unpacks each package of .ci/apt-extract into .cache/apt/<package>/ unless it
 * is there already (a `.extracted` marker names the .deb). Unpacked into a sibling folder
 * first and renamed, so an interrupted run never leaves half a package that looks done.
 */
function extractListed() {
  for (const pkg of readList(".ci/apt-extract")) {
    const dest = join(root, ".cache", "apt", pkg);
    if (existsSync(join(dest, ".extracted"))) continue;
    console.error(`test prerequisites: fetching ${pkg} with apt-get download (unpacked into .cache/apt/${pkg}, no service started)…`);
    // apt drops to the _apt user to download: the folder must be writable by it.
    const work = mkdtempSync(join(tmpdir(), "conveyor-apt-"));
    chmodSync(work, 0o777);
    try {
      if (!download(pkg, work)) {
        if (!asRoot || spawnSync("apt-get", ["update", "-qq"], { stdio: ["ignore", "ignore", "inherit"] }).status !== 0 || !download(pkg, work)) {
          console.error(`test prerequisites: apt-get download ${pkg} failed; run \`apt-get update\` (as root) and try again`);
          process.exit(1);
        }
      }
      const deb = readdirSync(work).find((f) => f.endsWith(".deb"));
      if (!deb) throw new Error(`apt-get download ${pkg} left no .deb`);
      const staging = `${dest}.partial`;
      rmSync(staging, { recursive: true, force: true });
      mkdirSync(staging, { recursive: true });
      execFileSync("dpkg", ["-x", join(work, deb), staging], { stdio: ["ignore", "ignore", "inherit"] });
      writeFileSync(join(staging, ".extracted"), `${deb}\n`);
      rmSync(dest, { recursive: true, force: true });
      renameSync(staging, dest);
    } catch (err) {
      console.error(`test prerequisites: could not unpack ${pkg} into ${dest}: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
}

function download(pkg, dir) {
  return spawnSync("apt-get", ["download", "-qq", pkg], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] }).status === 0;
}

/** A list file: package names separated by white space; `#` starts a comment. */
function readList(file) {
  const path = join(root, file);
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8").split("\n").map((line) => line.replace(/#.*/, "")).join(" ").split(/\s+/).filter(Boolean);
}

function isInstalled(pkg) {
  const file = NEEDS[pkg];
  if (file) return existsSync(file);
  return spawnSync("dpkg", ["-s", pkg], { stdio: "ignore" }).status === 0;
}

function run(argv, env) {
  execFileSync(argv[0], argv.slice(1), { env, stdio: ["ignore", "ignore", "inherit"] });
}
