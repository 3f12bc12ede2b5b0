/**
 * A node whose start waits and retries (the changelog's NATS not reachable yet) stays up
 * and retries: the retries pause on the clock's timers, which never keep a process alive,
 * and before the ports are bound nothing else did, so such a node used to end with exit
 * code 0 and no word (a restarted cluster node in CI). No etcd or NATS is needed: the
 * changelog is opened before the node contacts etcd, and nothing listens on its port.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/node-process.js";
import { freePort } from "../support/etcd.js";

describe("a starting node's retries", () => {
  it("keep it running while the changelog's NATS cannot be reached: it retries, it does not exit", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "conveyor-start-retries-"));
    const nats = await freePort(); // nothing listens there
    const child = spawn(process.execPath, [join(REPO_ROOT, "bin/conveyord.js"), "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
      "--log-level", "info", "--set", "cluster_etcd=127.0.0.1:1", "--set", `cluster_nats=127.0.0.1:${nats}`], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      // Two failed attempts, so the pause between them passed with the process alive.
      const retried = new Promise<"retried">((resolve) => {
        let warnings = 0;
        createInterface({ input: child.stdout! }).on("line", (line) => {
          if (line.includes("cannot reach the changelog") && ++warnings === 2) resolve("retried");
        });
      });
      const outcome = await Promise.race([retried, exited.then((code) => `exited with ${code}`)]);
      expect(outcome, stderr).toBe("retried");
    } finally {
      child.kill("SIGKILL");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
