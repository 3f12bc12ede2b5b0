/**
 * The dependency rules of ARCHITECTURE.md, checked on the source text (like a lint):
 * dependencies point inward, only one folder touches each infrastructure library, and
 * the grain's core never reads the clock, arms timers or draws its own randomness.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/node-process.js";

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

const SRC = join(REPO_ROOT, "src");
const files = sources(SRC).filter((f) => !f.includes(`${join("src", "gen")}`));
const importsOf = (file: string) =>
  [...readFileSync(file, "utf8").matchAll(/^\s*(?:import|export)(?:[^"'`;]*?\bfrom)?\s*["']([^"']+)["']/gm)].map((m) => m[1]!);
const folderOf = (file: string) => relative(SRC, file).split("/")[0]!;

/** Resolves a relative import to the top-level src folder it lands in. */
function targetFolder(file: string, spec: string): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const resolved = relative(SRC, join(file, "..", spec));
  return resolved.startsWith("..") ? "outside" : resolved.split("/")[0];
}

const ALLOWED: Record<string, string[]> = {
  base: ["base"],
  grains: ["grains", "base"],
  storage: ["storage", "grains", "base"],
  // The replicated changelog (issue 14): a port and its engines, below the cluster logic that
  // uses it; its record format converts the grain's effects to generated protobuf messages
  // (the task-state and strategy names through rpc/wire-names.ts, their one derivation).
  changelog: ["changelog", "grains", "rpc", "gen", "base"],
  cluster: ["cluster", "changelog", "grains", "base"],
  rpc: ["rpc", "base", "gen"],
  sdk: ["sdk", "rpc", "base", "gen"],
  server: ["server", "cluster", "changelog", "grains", "storage", "rpc", "base", "gen"],
};

describe("architecture", () => {
  it("sees the source tree (so the checks below cannot pass vacuously)", () => {
    expect(files.length).toBeGreaterThan(40);
    expect(files.flatMap(importsOf).filter((s) => s.startsWith(".")).length).toBeGreaterThan(150);
    expect(targetFolder(join(SRC, "server", "node.ts"), "../storage/database.js")).toBe("storage");
  });

  it("dependencies point inward", () => {
    const violations: string[] = [];
    for (const file of files) {
      const from = folderOf(file);
      const allowed = ALLOWED[from];
      if (!allowed) continue; // the composition roots (index.ts, main.ts) may use everything
      for (const spec of importsOf(file)) {
        const to = targetFolder(file, spec);
        if (to && !to.endsWith(".ts") && !to.endsWith(".js") && !allowed.includes(to)) violations.push(`${relative(REPO_ROOT, file)} imports ${spec}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it("one folder owns each infrastructure library", () => {
    const owners: Record<string, string[]> = {
      "better-sqlite3": ["storage"],
      hashring: ["cluster"],
      etcd3: ["cluster"],
      "@grpc/grpc-js": ["rpc", "server"],
      "@grpc/reflection": ["rpc"],
      "@bufbuild/cel": ["server"],
      "cron-parser": ["server"],
      "pino-pretty": ["server"],
      "@nats-io/transport-node": ["changelog"],
      "@nats-io/jetstream": ["changelog"],
      "@nats-io/nats-core": ["changelog"],
      "@nats-io/obj": ["changelog"],
    };
    // A package's subpaths (`@nats-io/jetstream/internal`) belong to the package's owner.
    const ownerOf = (spec: string) => owners[spec] ?? Object.entries(owners).find(([lib]) => spec.startsWith(`${lib}/`))?.[1];
    const violations: string[] = [];
    for (const file of files) {
      for (const spec of importsOf(file)) {
        const owner = ownerOf(spec);
        if (owner && !owner.includes(folderOf(file))) violations.push(`${relative(REPO_ROOT, file)} imports ${spec}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it("the grains read no clock, arm no timer and draw no randomness of their own", () => {
    const banned = /\b(Date\.now|new Date\(|setTimeout|setInterval|setImmediate|Math\.random|performance\.now)\b/;
    const violations = files
      .filter((f) => folderOf(f) === "grains")
      .flatMap((f) => readFileSync(f, "utf8").split("\n").map((line, i) => [f, i + 1, line] as const))
      .filter(([, , line]) => banned.test(line) && !line.trim().startsWith("*") && !line.trim().startsWith("//"))
      .map(([f, n, line]) => `${relative(REPO_ROOT, f)}:${n}: ${line.trim()}`);
    expect(violations).toEqual([]);
  });

  it("the client package (src/index.ts and what it imports) holds nothing server-side", () => {
    // packages/client compiles exactly this closure; it may reach grpc-js, protobuf-es and
    // Node's own modules, and no file of the server's folders or the server half of rpc.
    const seen = new Set<string>();
    const libraries = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const spec of importsOf(file)) {
        if (spec.startsWith(".")) visit(join(file, "..", spec).replace(/\.js$/, ".ts"));
        else libraries.add(spec);
      }
    };
    visit(join(SRC, "index.ts"));
    expect(seen.size).toBeGreaterThan(20);
    const clientFolders = new Set(["sdk", "rpc", "base", "gen"]);
    const serverRpc = /^rpc\/(server|session-server|request-decode|json-dialect|reflection)\.ts$/;
    const serverSide = [...seen].map((f) => relative(SRC, f)).filter((f) => f !== "index.ts" && (!clientFolders.has(f.split("/")[0]!) || serverRpc.test(f)));
    expect(serverSide).toEqual([]);
    const allowedLibrary = /^(node:.+|@grpc\/grpc-js|@bufbuild\/protobuf(\/.+)?)$/;
    expect([...libraries].filter((l) => !allowedLibrary.test(l))).toEqual([]);
  });
});
