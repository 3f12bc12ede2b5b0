/**
 * `conveyord token new --name --roles --queues` prints an auth-file entry that a node
 * loads as printed: its token works on the queues it names and is refused elsewhere; a
 * bad pattern prints nothing, not even a token.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { Client, newTask } from "../../src/index.js";
import { NodeProcess, REPO_ROOT } from "../support/node-process.js";

const execFileAsync = promisify(execFile);
const conveyord = (args: string[]) => execFileAsync(process.execPath, [join(REPO_ROOT, "bin/conveyord.js"), ...args]);

describe("conveyord token new --name", () => {
  let node: NodeProcess | undefined;

  afterAll(async () => {
    await node?.stop();
    node?.cleanup();
  });

  it("prints an entry the node loads as it is; the token is held to its queues", async () => {
    const { stdout } = await conveyord(["token", "new", "--name", "billing-api", "--roles", "producer", "--queues", "billing-*,*-invoices"]);
    const token = /^token: +(\S+)$/m.exec(stdout)![1]!;
    const entry = stdout.slice(stdout.indexOf("  - name:"));
    expect(entry).toContain('queues: ["billing-*", "*-invoices"]');
    const file = join(mkdtempSync(join(tmpdir(), "conveyor-auth-")), "auth.yaml");
    writeFileSync(file, `tokens:\n${entry}`);
    node = await NodeProcess.start({ settings: { auth_file: file } });
    const client = new Client({ address: node.grpcAddress, token, timeoutMs: 5_000 });
    try {
      await client.enqueue(newTask("t"), { queue: "billing-eu" });
      await client.enqueue(newTask("t"), { queue: "eu-invoices" });
      await expect(client.enqueue(newTask("t"), { queue: "payroll" })).rejects.toMatchObject({
        code: "PERMISSION_DENIED", message: expect.stringContaining('billing-api (queues: billing-*, *-invoices) may not touch queue "payroll"'),
      });
    } finally {
      client.close();
    }
  });

  it("refuses a pattern with ? and --queues without --name, printing no token", async () => {
    for (const args of [["--name", "a", "--queues", "billing-?"], ["--queues", "billing-*"]]) {
      const out = await conveyord(["token", "new", ...args]).then(() => undefined, (e: { code: number; stdout: string; stderr: string }) => e);
      expect(out, args.join(" ")).toMatchObject({ code: 1 });
      expect(out!.stdout).toBe("");
    }
    const bad = await conveyord(["token", "new", "--name", "a", "--queues", "billing-?"]).catch((e: { stderr: string }) => e);
    expect((bad as { stderr: string }).stderr).toContain("only * is a wildcard");
  });
});
