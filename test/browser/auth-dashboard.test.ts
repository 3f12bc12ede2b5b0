/**
 * The dashboard through TLS with a token, in headless Chromium: the page asks for a token
 * (a refused call → the form), keeps it for the tab, sends it as a header (never in a
 * URL), and then shows the node's queues; a reader's token cannot pause (403, nothing changes)
 * and sees the Cluster tab.
 */
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, type Browser } from "playwright-core";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskService } from "../../src/gen/conveyor/v1/task_service_pb.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { channelSecurity } from "../../src/sdk/connection-security.js";
import { CHROMIUM } from "../support/dashboard.js";
import { makeCerts, type CertFiles } from "../support/certs.js";
import { NodeProcess } from "../support/node-process.js";
import { authFileWithRoles, type RoleName } from "../support/security.js";

/** The page's sessionStorage, typed for page.evaluate (the test's own tsconfig has no DOM). */
type Browserish = { sessionStorage: { getItem(key: string): string | null } };

describe("dashboard with auth and TLS", () => {
  let certs: CertFiles;
  let node: NodeProcess;
  let browser: Browser;
  let tokens: Record<RoleName, string>;
  let scopedTokens: Record<RoleName, string>;
  let admin: RpcChannel;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing`);
    certs = makeCerts();
    const auth = authFileWithRoles({ scoped: ["dash-*"] });
    ({ tokens, scopedTokens } = auth);
    [node, browser] = await Promise.all([
      NodeProcess.start({ settings: { auth_file: auth.file, tls_cert: certs.serverCert, tls_key: certs.serverKey } }),
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--no-first-run"] }),
    ]);
    admin = new RpcChannel({ address: node.grpcAddress, ...channelSecurity({ token: tokens.admin, tls: { ca: certs.read(certs.caCert) } }) });
    await admin.service(TaskService).enqueue({ task: { queue: "dash-q", type: "t" } });
    await admin.service(TaskService).enqueue({ task: { queue: "other-q", type: "t" } });
  }, 60_000);

  afterAll(async () => {
    admin?.close();
    await browser?.close();
    await node?.stop();
    node?.cleanup();
  });

  it("asks for a token, keeps it for the tab as a header, and shows the queues", async () => {
    // The test's CA is not in Chromium's store: the context accepts the node's certificate (the TLS itself is real).
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const urls: string[] = [];
    const authHeaders: string[] = [];
    page.on("request", (r) => {
      urls.push(r.url());
      const a = r.headers().authorization;
      if (a) authHeaders.push(a);
    });
    await page.goto(`https://127.0.0.1:${node.httpPort}/#/queues`);
    await page.locator("#token-form").waitFor();
    await page.locator("#token-input").fill(tokens.reader);
    await page.locator("#token-form button[type=submit]").click();
    await page.getByText("dash-q").first().waitFor();
    expect(authHeaders.length).toBeGreaterThan(0);
    expect(authHeaders.every((a) => a === `Bearer ${tokens.reader}`)).toBe(true);
    expect(urls.some((u) => u.includes(tokens.reader))).toBe(false);
    expect(await page.evaluate(() => (globalThis as unknown as Browserish).sessionStorage.getItem("conveyor.token"))).toBe(tokens.reader);
    // A reader sees no actions: the pause button is there but hidden.
    const pause = page.locator('button[data-focus-key="pause:dash-q"]');
    await pause.waitFor({ state: "attached" });
    expect(await pause.isVisible()).toBe(false);
    await page.getByText("reader-token (reader)").waitFor();
    // A reader's pause is refused by the node and changes nothing.
    const status = await page.evaluate(async (token) => {
      const res = await fetch("/api/conveyor.v1.AdminService/PauseQueue", {
        method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ queue: "dash-q" }),
      });
      return res.status;
    }, tokens.reader);
    expect(status).toBe(403);
    expect((await admin.service(AdminService).listQueues({})).queues.find((q) => q.name === "dash-q")?.paused).toBe(false);
    // The Cluster tab is reads only (GetClusterStatus, GetClusterInfo): a reader sees all of it.
    await page.locator('nav[aria-label="Sections"] a', { hasText: "Cluster" }).click();
    await page.locator('[data-fact="cluster"]', { hasText: "single node" }).waitFor();
    await page.locator("tr[data-partition]").nth(63).waitFor();
    expect(await page.locator(".messages .alert").count()).toBe(0);
    await context.close();
  }, 60_000);

  it("a token scoped to queue patterns sees only its queues, and says so", async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(`https://127.0.0.1:${node.httpPort}/#/queues`);
    await page.locator("#token-input").fill(scopedTokens.reader);
    await page.locator("#token-form button[type=submit]").click();
    await page.getByText("reader-scoped (reader; queues dash-*)").waitFor();
    await page.getByText("dash-q").first().waitFor();
    // One ListQueues answer fills the table: other-q would be in it now if the node had sent it.
    expect(await page.getByText("other-q").count()).toBe(0);
    await context.close();
  }, 60_000);

  it("shows an admin the actions", async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(`https://127.0.0.1:${node.httpPort}/#/queues`);
    await page.locator("#token-input").fill(tokens.admin);
    await page.locator("#token-form button[type=submit]").click();
    await page.locator('button[data-focus-key="pause:dash-q"]').waitFor({ state: "visible" });
    await page.getByText("admin-token (admin)").waitFor();
    await context.close();
  }, 60_000);
});
