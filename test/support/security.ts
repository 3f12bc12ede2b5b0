/** Shared plumbing of the security tests: auth files with fresh tokens, raw HTTP with any Host, refused starts. */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { BulkAction } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { LimitStrategy, TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
import { Outcome } from "../../src/gen/conveyor/v1/worker_service_pb.js";
import { newToken } from "../../src/server/security/tokens.js";
import { REPO_ROOT } from "./node-process.js";

export const ROLE_NAMES = ["admin", "producer", "worker", "reader"] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

/**
 * An auth file in a temp dir with one fresh token per role (named `<role>-token`), and the
 * tokens themselves; `scoped` adds one token per role named `<role>-scoped` holding those
 * queue patterns (`scopedTokens`).
 */
export function authFileWithRoles(extra: { metricsPublic?: boolean; scoped?: string[] } = {}): {
  file: string; tokens: Record<RoleName, string>; scopedTokens: Record<RoleName, string>;
} {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-auth-"));
  const tokens = {} as Record<RoleName, string>;
  const scopedTokens = {} as Record<RoleName, string>;
  const lines = ["tokens:"];
  for (const role of ROLE_NAMES) {
    const { token, sha256 } = newToken();
    tokens[role] = token;
    lines.push(`  - name: ${role}-token`, `    sha256: ${sha256}`, `    roles: [${role}]`);
    if (!extra.scoped) continue;
    const scoped = newToken();
    scopedTokens[role] = scoped.token;
    lines.push(`  - name: ${role}-scoped`, `    sha256: ${scoped.sha256}`, `    roles: [${role}]`, `    queues: ${JSON.stringify(extra.scoped)}`);
  }
  if (extra.metricsPublic) lines.push("metrics_public: true");
  const file = join(dir, "auth.yaml");
  writeFileSync(file, lines.join("\n") + "\n");
  return { file, tokens, scopedTokens };
}

/** A small task for `queue`. */
export const taskSpecIn = (queue: string) => ({ queue, type: "t", payload: new TextEncoder().encode("{}"), contentType: "application/json" });

/**
 * A request each RPC acts on if allowed, aimed at `queue` (or the task `taskId`), so a
 * refusal that let it through would change the state a test snapshots. `removableQueue`
 * is what DeleteQueue removes.
 */
export function matrixRequest(rpc: string, target: { queue: string; removableQueue: string; taskId: string }): Record<string, unknown> {
  const { queue, taskId } = target;
  const taskSpec = taskSpecIn(queue);
  const requests: Record<string, Record<string, unknown>> = {
    "TaskService/Enqueue": { task: taskSpec },
    "TaskService/EnqueueBatch": { tasks: [taskSpec] },
    "TaskService/EnqueueTx": { tasks: [taskSpec] },
    "TaskService/GetTask": { id: taskId },
    "TaskService/CancelTask": { id: taskId },
    "TaskService/WaitTask": { id: taskId, timeoutMs: 1 },
    "WorkerService/Lease": { workerId: "w", queues: [{ queue, weight: 1 }], maxDeliveries: 1, waitMs: 0 },
    "WorkerService/Heartbeat": { workerId: "w", leases: [{ queue, leaseId: "no-such-lease" }] },
    "WorkerService/Settle": { workerId: "w", settlements: [{ queue, leaseId: "no-such-lease", taskId, outcome: Outcome.SUCCESS }] },
    "WorkerService/RegisterTaskTypes": { workerId: "w", types: [{ type: "t2", concurrency: [{ expression: "input.k", maxRuns: 1, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] }] },
    "AdminService/SetQueueConcurrencyLimit": { queue, max: 9 },
    "AdminService/SetQueueRateLimit": { queue, ratePerSec: 9 },
    "AdminService/SetGroupConfig": { config: { queue, group: "g2", maxSize: 9, maxDelayMs: 1000n, graceMs: 1000n } },
    "AdminService/DeleteGroupConfig": { queue, group: "g" },
    "AdminService/SetStrategies": { type: "t3", rules: [{ expression: "input.k", maxRuns: 2, strategy: LimitStrategy.GROUP_ROUND_ROBIN }] },
    "AdminService/DeleteStrategies": { type: "t" },
    "AdminService/SetSchedule": { schedule: { name: "s2", task: { queue, type: "t" }, cadence: { case: "intervalMs", value: 3_600_000n } } },
    "AdminService/DeleteQueue": { queue: target.removableQueue },
    "AdminService/BulkTaskAction": { queue, action: BulkAction.DELETE, state: TaskState.CANCELLED },
    // A single node answers these NOT_A_CLUSTER once allowed; a refusal comes first.
    "AdminService/DrainNode": { nodeId: "n2" },
    "AdminService/MovePartition": { partition: 0, toNodeId: "n2" },
    "ClusterService/ReportSlots": { fromNode: "n", seq: 1n, partitions: [], slots: [] },
  };
  const method = rpc.split("/")[1]!;
  return requests[rpc] ?? (/Task$/.test(method) ? { id: taskId } : /Schedule/.test(method) ? { queue, name: "s" } : /Queue|Limit|Group|Activity|Tasks/.test(method) ? { queue } : {});
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
