/**
 * The client package as a user gets it: `npm pack` of packages/client (its prepack
 * compiles the client's closure of src/) in a copy of the checkout's tracked files, then
 * `npm install` of the tarball alone into an empty project, with install scripts allowed:
 * nothing may compile, nothing server-side may arrive. A producer (ESM), a worker, and a
 * CommonJS `require` then run against a real node from the checkout's dist/.
 *
 * Reported, not asserted (a shared 2-core machine's timing): the install's wall time.
 * Asserted: no install script but protobufjs's version-scheme check, no native module, node_modules ≤ 15 MB, only the client's
 * two dependencies and theirs.
 */
import { execFile, type ExecFileOptions } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";

const exec = promisify(execFile);
const CLIENT_DIR = join(REPO_ROOT, "packages", "client");
const clientPkg = JSON.parse(readFileSync(join(CLIENT_DIR, "package.json"), "utf8")) as { name: string; version: string; dependencies: Record<string, string> };

const childEnv: NodeJS.ProcessEnv = Object.fromEntries(Object.entries({
  ...process.env,
  PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}`,
}).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
const run = (file: string, args: string[], options: ExecFileOptions = {}) =>
  exec(file, args, { env: childEnv, maxBuffer: 16 * 1024 * 1024, encoding: "utf8", ...options }) as Promise<{ stdout: string; stderr: string }>;
const npm = (args: string[], cwd: string) => run("npm", args, { cwd });

function bytesUnder(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const stat = statSync(path);
    total += stat.isDirectory() ? bytesUnder(path) : stat.size;
  }
  return total;
}

describe("the client package", () => {
  const work = mkdtempSync(join(tmpdir(), "conveyor-client-pack-"));
  const source = join(work, "source");
  const app = join(work, "app");
  let entries: string[] = [];

  beforeAll(async () => {
    const tracked = (await run("git", ["ls-files", "-z"], { cwd: REPO_ROOT })).stdout.split("\0").filter(Boolean);
    for (const file of tracked) {
      if (!existsSync(join(REPO_ROOT, file))) continue;
      mkdirSync(dirname(join(source, file)), { recursive: true });
      cpSync(join(REPO_ROOT, file), join(source, file));
    }
    symlinkSync(join(REPO_ROOT, "node_modules"), join(source, "node_modules"));
    const packed = JSON.parse((await npm(["pack", "--json", "--pack-destination", work], join(source, "packages", "client"))).stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    entries = packed[0]!.files.map((f) => f.path).sort();

    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", private: true, type: "module" }));
    const t0 = performance.now();
    await npm(["install", "--prefer-offline", "--no-audit", "--no-fund", join(work, packed[0]!.filename)], app);
    const seconds = (performance.now() - t0) / 1000;
    console.log(`client install: ${seconds.toFixed(1)} s, node_modules ${(bytesUnder(join(app, "node_modules")) / 2 ** 20).toFixed(1)} MB`);
  }, 300_000);

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it("holds the compiled client and its types, nothing server-side", () => {
    expect(entries).toEqual(expect.arrayContaining(["package.json", "README.md", "LICENSE", "dist/index.js", "dist/index.d.ts", "dist/sdk/worker.js"]));
    const allowed = /^(package\.json|README\.md|LICENSE|dist\/(index|(base|sdk|rpc|gen)\/.+)\.(js|d\.ts))$/;
    expect(entries.filter((e) => !allowed.test(e))).toEqual([]);
    const serverSide = /^dist\/(server|storage|cluster|changelog|grains)\/|^dist\/rpc\/(server|session-server|request-decode|json-dialect|reflection)\./;
    expect(entries.filter((e) => serverSide.test(e))).toEqual([]);
  });

  it("installs without an install script or a native module, in at most 15 MB", () => {
    const lock = JSON.parse(readFileSync(join(app, "package-lock.json"), "utf8")) as { packages: Record<string, { hasInstallScript?: boolean }> };
    const installed = Object.keys(lock.packages).filter((p) => p.startsWith("node_modules/"));
    // protobufjs (under grpc-js's proto-loader) has a postinstall that only compares version
    // schemes in its dependent's package.json; nothing else may run at install, nothing compiles.
    expect(installed.filter((p) => lock.packages[p]!.hasInstallScript)).toEqual(["node_modules/protobufjs"]);
    expect(installed.filter((p) => existsSync(join(app, p, "binding.gyp")))).toEqual([]);
    expect(installed).not.toContain("node_modules/better-sqlite3");
    expect(installed.filter((p) => /etcd3|@nats-io|pino|prom-client|@bufbuild\/cel/.test(p))).toEqual([]);
    expect(Object.keys(clientPkg.dependencies).sort()).toEqual(["@bufbuild/protobuf", "@grpc/grpc-js"]);
    expect(bytesUnder(join(app, "node_modules"))).toBeLessThanOrEqual(15 * 2 ** 20);
  });

  it("runs a producer (ESM), a worker and a CommonJS require against a node", async () => {
    const node = await NodeProcess.start();
    try {
      writeFileSync(join(app, "producer.mjs"), `
        import { Client, newTask, json } from ${JSON.stringify(clientPkg.name)};
        const client = new Client({ address: process.argv[2] });
        const infos = await Promise.all(Array.from({ length: 10 }, (_, i) =>
          client.enqueue(newTask("client:double", json({ n: i })), { queue: "client-pkg" })));
        console.log(JSON.stringify(infos.map((t) => t.id)));
        client.close();
      `);
      writeFileSync(join(app, "worker.mjs"), `
        import { Mux, Worker } from ${JSON.stringify(clientPkg.name)};
        let done = 0;
        const worker = new Worker({
          address: process.argv[2], queues: ["client-pkg"], concurrency: 4, logger: null,
          mux: new Mux().handle("client:double", async (task) => {
            if (++done === 10) setImmediate(() => worker.stop({ graceMs: 5000 }).then(() => console.log("stopped")));
            return { doubled: task.json().n * 2 };
          }),
        }).start();
      `);
      writeFileSync(join(app, "wait.cjs"), `
        const { Client } = require(${JSON.stringify(clientPkg.name)});
        const client = new Client({ address: process.argv[2] });
        client.waitForResult(process.argv[3], { timeout: "20s" }).then((r) => { console.log(JSON.stringify(r.json())); client.close(); });
      `);
      const ids = JSON.parse((await run(process.execPath, ["producer.mjs", node.grpcAddress], { cwd: app })).stdout) as string[];
      expect(ids).toHaveLength(10);
      const worked = await run(process.execPath, ["worker.mjs", node.grpcAddress], { cwd: app, timeout: 60_000 });
      expect(worked.stdout).toContain("stopped");
      const waited = await run(process.execPath, ["wait.cjs", node.grpcAddress, ids[3]!], { cwd: app, timeout: 30_000 });
      expect(JSON.parse(waited.stdout)).toEqual({ doubled: 6 });
    } finally {
      await node.stop();
      node.cleanup();
    }
  }, 120_000);
});
