/**
 * Serves the dashboard (plain ES modules and CSS from the package's `web/` folder) on the
 * node's HTTP port. No build step: the files are served as they are in the repository.
 * A strict Content-Security-Policy keeps the page from loading anything that is not
 * served by this node.
 */
import { existsSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { dirname, extname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { HttpRoute } from "./http.js";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".json": "application/json; charset=utf-8",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8",
};

const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/**
 * The package's `web/` folder, found by walking up from this module: `src/server/` when
 * run from source, `dist/src/server/` when built.
 */
export function findWebRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, "web");
    if (existsSync(join(candidate, "index.html"))) return candidate;
    if (dirname(dir) === dir) throw new Error(`cannot find the dashboard's web/index.html above ${from}`);
  }
}

/** GET/HEAD of files under `root`; `/` is `index.html`. Paths outside `root` are not served. */
export function staticRoute(root: string): HttpRoute {
  const base = resolve(root);
  return async (req, res) => {
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    let path: string;
    try {
      path = decodeURIComponent((req.url ?? "/").split("?")[0]!);
    } catch {
      return false;
    }
    if (path.endsWith("/")) path += "index.html";
    const file = resolve(base, `.${path}`);
    if (!file.startsWith(base + sep) || path.split("/").some((part) => part.startsWith("."))) return false;
    const type = CONTENT_TYPES[extname(file)];
    if (!type) return false;
    let info;
    try {
      info = await stat(file);
    } catch {
      return false;
    }
    if (!info.isFile()) return false;
    const etag = `"${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`;
    const headers = { ...SECURITY_HEADERS, "content-type": type, "cache-control": "no-cache", etag };
    if (req.headers["if-none-match"] === etag) {
      res.writeHead(304, headers);
      res.end();
      return true;
    }
    const body = await readFile(file);
    res.writeHead(200, { ...headers, "content-length": body.byteLength });
    res.end(req.method === "HEAD" ? undefined : body);
    return true;
  };
}
