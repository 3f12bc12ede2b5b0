/** Both bins answer `--version` with the version in package.json. */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/node-process.js";

const execFileAsync = promisify(execFile);
const { version } = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string };

describe("--version", () => {
  it.each(["conveyor", "conveyord"])("%s --version prints the package version", async (bin) => {
    for (const flag of ["--version", "-V"]) {
      const { stdout } = await execFileAsync(process.execPath, [join(REPO_ROOT, "bin", `${bin}.js`), flag]);
      expect(stdout).toBe(`${version}\n`);
    }
  });
});
