/**
 * The npm package as a user gets it: `npm pack` (its prepack builds dist/) in a copy of
 * the checkout's tracked files, `npm install` of the tarball into a scratch project,
 * then the package's own bins, a producer and a worker that import it by name, and a
 * TypeScript consumer of its types, all from that project.
 *
 * One shortcut, so the test does not spend ~2 minutes compiling SQLite: the install
 * skips dependencies' install scripts (--ignore-scripts) and takes better-sqlite3's
 * native binary from the checkout's node_modules, which `npm ci` built from the same
 * version for the Node running this test (checked below). The package itself has no
 * install script, and better-sqlite3's own install is what `npm ci` already exercises.
 * Dependencies come from the npm cache when it has them (--prefer-offline).
 */
import { execFile, type ExecFileOptions } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";

const exec = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { name: string; version: string };

/** The environment for child npm and node runs: this Node first on PATH, no npm_* variables of an enclosing `npm test`. */
const childEnv: NodeJS.ProcessEnv = Object.fromEntries(Object.entries({
  ...process.env,
  PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}`,
}).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
const run = (file: string, args: string[], options: ExecFileOptions = {}) =>
  exec(file, args, { env: childEnv, maxBuffer: 16 * 1024 * 1024, encoding: "utf8", ...options }) as Promise<{ stdout: string; stderr: string }>;
const npm = (args: string[], cwd: string) => run("npm", args, { cwd });

describe("the npm package", () => {
  const work = mkdtempSync(join(tmpdir(), "conveyor-pack-"));
  const source = join(work, "source");
  const app = join(work, "app");
  let tarball = "";
  let entries: string[] = [];

  beforeAll(async () => {
    // The checkout's tracked files as they are now (with uncommitted edits), plus stray
    // files a working copy collects: none of them may end up in the package.
    const tracked = (await run("git", ["ls-files", "-z"], { cwd: REPO_ROOT })).stdout.split("\0").filter(Boolean);
    for (const file of tracked) {
      if (!existsSync(join(REPO_ROOT, file))) continue; // deleted, not yet committed
      mkdirSync(dirname(join(source, file)), { recursive: true });
      cpSync(join(REPO_ROOT, file), join(source, file));
    }
    symlinkSync(join(REPO_ROOT, "node_modules"), join(source, "node_modules"));
    mkdirSync(join(source, "data"));
    writeFileSync(join(source, "data", "conveyor.db"), "not a database");
    writeFileSync(join(source, "notes.txt"), "untracked");
    mkdirSync(join(source, "dist", "stale"), { recursive: true });
    writeFileSync(join(source, "dist", "stale", "old.js"), "// left over from an earlier build");

    const packed = JSON.parse((await npm(["pack", "--json", "--pack-destination", work], source)).stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    tarball = join(work, packed[0]!.filename);
    entries = packed[0]!.files.map((f) => f.path).sort();

    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", private: true, type: "module" }));
    await npm(["install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", tarball], app);
    const installed = join(app, "node_modules", "better-sqlite3");
    const built = join(REPO_ROOT, "node_modules", "better-sqlite3");
    const versionOf = (dir: string) => (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version: string }).version;
    expect(versionOf(installed)).toBe(versionOf(built));
    mkdirSync(join(installed, "build", "Release"), { recursive: true });
    copyFileSync(join(built, "build", "Release", "better_sqlite3.node"), join(installed, "build", "Release", "better_sqlite3.node"));
  }, 300_000);

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it("holds the build, the dashboard, the protos, deploy files and docs, and nothing else", () => {
    expect(entries).toEqual(expect.arrayContaining([
      "package.json", "README.md", "bin/conveyor.js", "bin/conveyord.js",
      "dist/src/index.js", "dist/src/index.d.ts", "dist/src/main.js", "dist/cli/conveyor.js",
      "web/index.html", "web/js/main.js", "proto/conveyor/v1/task_service.proto",
      "deploy/conveyord.service", "deploy/conveyor.yaml", "deploy/auth.yaml", "docs/task-states.md",
    ]));
    const allowed = /^(package\.json|README\.md|LICENSE|bin\/[^/]+\.js|dist\/(src|cli)\/.+\.(js|d\.ts)|web\/.+|proto\/.+\.proto|deploy\/.+|docs\/.+\.md)$/;
    expect(entries.filter((e) => !allowed.test(e))).toEqual([]);
    expect(entries.filter((e) => /^(test|bench|src|cli|data)\/|^dist\/(bench|stale)\/|\.map$|notes\.txt/.test(e))).toEqual([]);
  });

  it("installs with both bins, which answer --version and --help", async () => {
    const bin = join(app, "node_modules", ".bin");
    for (const name of ["conveyor", "conveyord"]) {
      expect((await run(join(bin, name), ["--version"], { cwd: app })).stdout).toBe(`${pkg.version}\n`);
      expect((await run(join(bin, name), ["--help"], { cwd: app })).stdout).toContain(`Usage: ${name}`);
    }
  });

  it("runs a node, a producer and a worker from the installed package; the CLI, the dashboard and backup work", async () => {
    const node = await NodeProcess.start({ bin: join(app, "node_modules", ".bin", "conveyord") });
    try {
      writeFileSync(join(app, "producer.mjs"), `
        import { Client, newTask, json } from ${JSON.stringify(pkg.name)};
        const client = new Client({ address: process.argv[2] });
        const infos = await Promise.all(Array.from({ length: 20 }, (_, i) =>
          client.enqueue(newTask("pkg:double", json({ n: i })), { queue: "pkg" })));
        console.log(JSON.stringify(infos.map((t) => t.id)));
        client.close();
      `);
      writeFileSync(join(app, "worker.mjs"), `
        import { Mux, Worker } from ${JSON.stringify(pkg.name)};
        let done = 0;
        const worker = new Worker({
          address: process.argv[2], queues: ["pkg"], concurrency: 4,
          mux: new Mux().handle("pkg:double", async (task) => {
            const result = { doubled: task.json().n * 2 };
            if (++done === 20) setImmediate(() => worker.stop({ graceMs: 5000 }).then(() => console.log("stopped")));
            return result;
          }),
        }).start();
      `);
      const ids = JSON.parse((await run(process.execPath, ["producer.mjs", node.grpcAddress], { cwd: app })).stdout) as string[];
      expect(ids).toHaveLength(20);
      const worked = await run(process.execPath, ["worker.mjs", node.grpcAddress], { cwd: app, timeout: 60_000 });
      expect(worked.stdout).toContain("stopped");

      const conveyor = join(app, "node_modules", ".bin", "conveyor");
      const listed = JSON.parse((await run(conveyor, ["--server", node.grpcAddress, "--json", "task", "ls", "pkg", "--state", "completed", "--limit", "100"], { cwd: app })).stdout) as {
        tasks: Array<{ id: string }>;
      };
      expect(listed.tasks.map((t) => t.id).sort()).toEqual([...ids].sort());

      const page = await fetch(`http://${node.httpAddress}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("<script");

      const backup = join(work, "backup.db");
      const copied = await run(join(app, "node_modules", ".bin", "conveyord"), ["backup", "--data-dir", node.dataDir, "--out", backup], { cwd: app });
      expect(copied.stdout).toContain("20 tasks");
    } finally {
      await node.stop();
      node.cleanup();
    }
  }, 120_000);

  it("starts with the shipped deploy/conveyor.yaml (flags override its addresses and data dir)", async () => {
    const config = join(app, "node_modules", ...pkg.name.split("/"), "deploy", "conveyor.yaml");
    // Its auth_file is /etc/conveyor/auth.yaml on a real machine; here the shipped template.
    const settings = { auth_file: join(app, "node_modules", ...pkg.name.split("/"), "deploy", "auth.yaml") };
    const node = await NodeProcess.start({ bin: join(app, "node_modules", ".bin", "conveyord"), config, settings });
    try {
      expect(node.logs.join("\n")).toContain('"node":"conveyor-1"');
    } finally {
      await node.stop();
      node.cleanup();
    }
  }, 120_000);

  it("gives TypeScript consumers its types", async () => {
    writeFileSync(join(app, "consumer.ts"), `
      import { Client, Mux, newTask, json, type TaskView } from ${JSON.stringify(pkg.name)};
      const client: Client = new Client({ address: "127.0.0.1:7233" });
      const mux = new Mux().handle("t", async (task: TaskView) => task.json());
      export const run = async () => (await client.enqueue(newTask("t", json({})), { queue: "q", priority: 5 })).id.toUpperCase();
      export { mux };
    `);
    writeFileSync(join(app, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        module: "nodenext", moduleResolution: "nodenext", target: "ES2023", strict: true, noEmit: true,
        typeRoots: [join(REPO_ROOT, "node_modules", "@types")], types: ["node"],
      },
      files: ["consumer.ts"],
    }));
    await run(process.execPath, [join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "."], { cwd: app });
  }, 120_000);
});
