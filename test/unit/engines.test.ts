/**
 * Every package we publish promises Node versions in its `engines`; every package it
 * installs (its production dependencies, transitively, as package-lock.json resolves
 * them) must declare support for each of them, or npm warns at the user's install and the
 * dependency may not run (the case that prompted this: a NATS client that required
 * Node 22 under a package that promised 20). The versions checked are the lowest of each
 * range our `engines` names, the strictest for a `>=` requirement.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import semver from "semver";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/node-process.js";

interface LockEntry { version?: string; dependencies?: Record<string, string>; optionalDependencies?: Record<string, string>; engines?: { node?: string } | string[]; dev?: boolean; link?: boolean; resolved?: string }
const lock = JSON.parse(readFileSync(join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> };

/** The lock path npm resolves `name` to from the package at `from` (nested first, then upward). */
function resolve(from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = `${dir ? `${dir}/` : ""}node_modules/${name}`;
    const entry = lock.packages[candidate];
    if (entry) return entry.link && entry.resolved ? entry.resolved : candidate;
    if (!dir) return undefined;
    const cut = dir.lastIndexOf("/node_modules/");
    dir = cut < 0 ? "" : dir.slice(0, cut);
  }
}

/** Lock paths of the production dependencies of the package at `root`, transitively. */
function productionClosure(root: string): string[] {
  const seen = new Set<string>();
  const queue = [root];
  while (queue.length > 0) {
    const at = queue.pop()!;
    const entry = lock.packages[at]!;
    for (const name of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) {
      const found = resolve(at, name);
      if (found === undefined) {
        if (entry.optionalDependencies?.[name]) continue;
        throw new Error(`${at || "the root"} depends on ${name}, which package-lock.json does not hold`);
      }
      if (!seen.has(found)) {
        seen.add(found);
        queue.push(found);
      }
    }
  }
  return [...seen].sort();
}

const PUBLISHED = { "@conveyor-dev/conveyor": "", "@conveyor-dev/client": "packages/client" };

describe("engines", () => {
  for (const [name, path] of Object.entries(PUBLISHED)) {
    it(`${name}: every production dependency supports every Node its engines name`, () => {
      const manifest = JSON.parse(readFileSync(join(REPO_ROOT, path, "package.json"), "utf8")) as { name: string; engines: { node: string } };
      expect(manifest.name).toBe(name);
      const range = new semver.Range(manifest.engines.node);
      const lowest = range.set.map((comparators) => semver.minVersion(new semver.Range(comparators.map((c) => c.value).join(" ")))!.version);
      expect(lowest.length).toBeGreaterThanOrEqual(2);
      const closure = productionClosure(path);
      expect(closure.length).toBeGreaterThan(path ? 1 : 20);
      const unsupported: string[] = [];
      for (const dep of closure) {
        const engines = lock.packages[dep]!.engines;
        const wanted = engines && !Array.isArray(engines) ? engines.node : undefined;
        if (!wanted) continue;
        for (const version of lowest) {
          if (!semver.satisfies(version, wanted)) unsupported.push(`${dep} wants node ${wanted}; ${name} promises ${version}`);
        }
      }
      expect(unsupported).toEqual([]);
    });
  }
});
