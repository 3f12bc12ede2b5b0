#!/usr/bin/env node
/**
 * `npm test` after the build: the vitest suite (with npm test's extra arguments, e.g. the
 * reporters .ci/run adds), then the Python SDK's tests (`npm run test:python`). Both always
 * run; the exit code fails if either failed.
 *
 * CONVEYOR_TEST_PARTS (comma-separated; unset runs all three) picks what runs:
 * - node-sensitive, node-independent: the vitest projects of vitest.config.ts;
 * - python: the Python SDK's tests.
 * CI uses it to run on a second Node only what can differ between Node versions
 * (.ci/run). npm test's extra arguments still apply, e.g. test file filters.
 */
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const PARTS = ["node-sensitive", "node-independent", "python"];
const parts = (process.env.CONVEYOR_TEST_PARTS ?? PARTS.join(",")).split(",").map((p) => p.trim()).filter(Boolean);
const unknown = parts.filter((p) => !PARTS.includes(p));
if (unknown.length > 0 || parts.length === 0) {
  console.error(`CONVEYOR_TEST_PARTS: expected some of ${PARTS.join(", ")}, got "${process.env.CONVEYOR_TEST_PARTS}"`);
  process.exit(1);
}

const projects = parts.filter((p) => p !== "python");
let ok = true;
if (projects.length > 0) {
  const vitest = spawnSync(process.execPath, [
    join(root, "node_modules/vitest/vitest.mjs"), "run",
    ...projects.flatMap((p) => ["--project", p]),
    ...process.argv.slice(2),
  ], { cwd: root, stdio: "inherit" });
  ok &&= vitest.status === 0;
}
if (parts.includes("python")) {
  const python = spawnSync("npm", ["run", "--silent", "test:python"], { cwd: root, stdio: "inherit" });
  ok &&= python.status === 0;
}
process.exit(ok ? 0 : 1);
