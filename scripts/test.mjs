#!/usr/bin/env node
/**
 * `npm test` after the build: the vitest suite (with npm test's extra arguments, e.g. the
 * reporters .ci/run adds), then the Python SDK's tests (`npm run test:python`). Both always
 * run; the exit code fails if either failed.
 */
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const vitest = spawnSync(process.execPath, [join(root, "node_modules/vitest/vitest.mjs"), "run", ...process.argv.slice(2)],
  { cwd: root, stdio: "inherit" });
const python = spawnSync("npm", ["run", "--silent", "test:python"], { cwd: root, stdio: "inherit" });
process.exit(vitest.status === 0 && python.status === 0 ? 0 : 1);
