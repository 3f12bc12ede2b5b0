/**
 * The package's own name and version, read from its package.json: `conveyor --version`
 * and `conveyord --version` print it. Found by walking up from this module, which sits
 * in `src/` when run from source and in `dist/src/` when built or installed.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export interface PackageInfo {
  name: string;
  version: string;
}

let cached: PackageInfo | undefined;

export function packageInfo(): PackageInfo {
  if (cached) return cached;
  const from = dirname(fileURLToPath(import.meta.url));
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as Partial<PackageInfo> & { bin?: Record<string, string> };
      // The package's own package.json names both bins (a dist/ folder holds none).
      if (pkg.name && pkg.version && pkg.bin?.conveyord) return (cached = { name: pkg.name, version: pkg.version });
    }
    if (dirname(dir) === dir) throw new Error(`cannot find conveyor's package.json above ${from}`);
  }
}
