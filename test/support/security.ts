/** Shared plumbing of the security tests: auth files with fresh tokens, raw HTTP with any Host, refused starts. */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { newToken } from "../../src/server/security/tokens.js";
import { REPO_ROOT } from "./node-process.js";

export const ROLE_NAMES = ["admin", "producer", "worker", "reader"] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

/** An auth file in a temp dir with one fresh token per role (named `<role>-token`), and the tokens themselves. */
export function authFileWithRoles(extra: { metricsPublic?: boolean } = {}): { file: string; tokens: Record<RoleName, string> } {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-auth-"));
  const tokens = {} as Record<RoleName, string>;
  const lines = ["tokens:"];
  for (const role of ROLE_NAMES) {
    const { token, sha256 } = newToken();
    tokens[role] = token;
    lines.push(`  - name: ${role}-token`, `    sha256: ${sha256}`, `    roles: [${role}]`);
  }
  if (extra.metricsPublic) lines.push("metrics_public: true");
  const file = join(dir, "auth.yaml");
  writeFileSync(file, lines.join("\n") + "\n");
  return { file, tokens };
}

export interface RawResponse {
  status: number;
  body: string;
}

/** An HTTP request with exactly these headers (fetch would not let a test set Host). */
export function rawHttp(address: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<RawResponse> {
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, method: options.method ?? "GET", headers: options.headers ?? {} }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

/** POST to the JSON API as the dashboard does, with an optional bearer token and extra headers. */
export function jsonApi(address: string, rpc: string, body: unknown, token?: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  return rawHttp(address, `/api/conveyor.v1.${rpc}`, {
    method: "POST", body: JSON.stringify(body),
    headers: { "content-type": "application/json", host: address, ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
  });
}

/**
 * Runs conveyord with `args` on a fresh data dir: resolves when it exits (refused) or
 * once it logs "conveyord listening" (then it is killed), with its stderr and logs.
 */
export async function startOutcome(args: string[]): Promise<{ started: boolean; code: number | null; stderr: string; logs: string; dataDirFiles: string[] }> {
  const dataDir = mkdtempSync(join(tmpdir(), "conveyor-test-"));
  const child = spawn(process.execPath, [join(REPO_ROOT, "bin/conveyord.js"), "--data-dir", dataDir, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  let logs = "";
  let started = false;
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout! }).on("line", (line) => {
    logs += line + "\n";
    if (line.includes("conveyord listening")) {
      started = true;
      child.kill("SIGKILL");
    }
  });
  const code = await new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
  return { started, code, stderr, logs, dataDirFiles: readdirSync(dataDir) };
}
