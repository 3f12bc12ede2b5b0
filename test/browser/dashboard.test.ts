/**
 * The dashboard end to end: headless Debian Chromium (playwright-core) against a real
 * conveyord, with the SDK to enqueue and the CLI to cross-check what the page did.
 * Needs `npm run build` (the daemon runs from dist) and /usr/bin/chromium: without it
 * these tests fail, they do not skip (CI installs it from .ci/apt-packages).
 * One screenshot per tab lands in test-output/screenshots/ for review.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask, skipRetry } from "../../src/index.js";
import { Dashboard, NARROW, WIDE, answerDialog, focusedText, hasText, pageOverflow } from "../support/dashboard.js";
import { NodeProcess } from "../support/node-process.js";

let d: Dashboard;

beforeAll(async () => {
  d = await Dashboard.start();
});

afterAll(async () => {
  await d?.close();
});

afterEach(() => {
  if (!d) return;
  expect(d.takeProblems(), "the page loaded only from the node and raised no errors").toEqual([]);
});

describe("dashboard", () => {
  it("overview: shows each queue's counts per state and the throughput it measures live", async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await d.sdk.client.enqueue(newTask("email:send", json({ to: `u${i}@example.com` })), { queue: "emails" })).id);
    await d.sdk.client.enqueue(newTask("email:send", json({ later: true })), { queue: "emails", processIn: "1h" });

    const page = await d.open();
    const row = page.locator('tr[data-queue="emails"]');
    await hasText(row.locator('td[data-state="pending"]'), "3");
    await hasText(row.locator('td[data-state="scheduled"]'), "1");
    await hasText(row.locator('td[data-state="active"]'), "0");
    await hasText(row.locator("td").nth(0), "running");
    // A count links to the task list filtered by that state.
    expect(await row.locator('td[data-state="pending"] a').getAttribute("href")).toBe("#/tasks?queue=emails&state=pending");

    // Live: more work appears without a reload, and finished work shows up as throughput.
    for (let i = 0; i < 12; i++) await d.sdk.client.enqueue(newTask("work", json({ i, fail: i % 4 === 0 })), { queue: "throughput" });
    d.sdk.worker(new Mux().handle("work", (task) => {
      if ((task.json() as { fail: boolean }).fail) throw skipRetry(new Error("bad input"));
    }), { queues: ["throughput"], concurrency: 4 });
    const work = page.locator('tr[data-queue="throughput"]');
    await hasText(work.locator('td[data-state="completed"]'), "9");
    await hasText(work.locator('td[data-state="archived"]'), "3");
    await page.locator(".chart .series.completed polyline, .chart .series.completed circle").first().waitFor();
    await hasText(page.locator('[data-card="failures"] .card-value'), "25 %");
    await d.screenshot(page, "overview");

    const narrow = await d.open("", NARROW);
    await hasText(narrow.locator('tr[data-queue="emails"] td[data-state="pending"]'), "3");
    expect(await pageOverflow(narrow), "no horizontal scrolling of the page on a narrow window").toBeLessThanOrEqual(0);
    await d.screenshot(narrow, "overview-narrow");
  });

  it("queues: pause and resume after a confirmation", async () => {
    await d.sdk.client.enqueue(newTask("noop", json({})), { queue: "pausable" });
    const page = await d.open("#/queues");
    const row = page.locator('tr[data-queue="pausable"]');
    await row.getByRole("button", { name: "Pause pausable" }).click();
    await answerDialog(page, "Cancel"); // dismissing does nothing
    expect((await d.sdk.counts("pausable")).paused).toBe(false);

    await row.getByRole("button", { name: "Pause pausable" }).click();
    await answerDialog(page, "Pause pausable");
    await hasText(row.locator(".badge"), "paused");
    // Focus is back on the queue's button (now "Resume") for the next keyboard action.
    expect(await focusedText(page)).toBe("Resume pausable");
    expect((await d.sdk.counts("pausable")).paused).toBe(true);
    await d.screenshot(page, "queues");

    await row.getByRole("button", { name: "Resume pausable" }).click();
    await answerDialog(page, "Resume pausable");
    await hasText(row.locator(".badge"), "running");
    expect((await d.sdk.counts("pausable")).paused).toBe(false);
  });

  it("concurrency: a limit set in the tab is what the CLI lists", async () => {
    const page = await d.open("#/concurrency");
    await page.getByLabel("Queue").fill("reports");
    await page.getByLabel("Max running per key").fill("3");
    await page.getByRole("button", { name: "Set limit" }).click();
    await hasText(page.locator('tr[data-queue="reports"] td[data-col="max"]'), "3");
    await page.getByText("Queue reports: at most 3 running per concurrency key.").waitFor();

    const listed = JSON.parse(await d.cli("concurrency", "ls", "--json")) as { limits: Array<{ queue: string; max: number }> };
    expect(listed.limits).toContainEqual(expect.objectContaining({ queue: "reports", max: 3 }));
    expect(await d.cli("concurrency", "ls")).toMatch(/reports\s+│?\s*3/);
    await d.screenshot(page, "concurrency");

    // Cleared from the tab, gone for the CLI too.
    await page.getByRole("button", { name: "Clear limit of reports" }).click();
    await answerDialog(page, "Clear limit");
    await page.getByText("No concurrency limits: every key is unbounded.").waitFor();
    expect(await d.cli("concurrency", "ls")).toContain("no concurrency limits");
  });

  it("tasks: browse a queue by state, open a task, cancel it after a confirmation", async () => {
    const { id } = await d.sdk.client.enqueue(
      newTask("invoice:render", json({ invoice: 42, lines: [{ sku: "A-1", qty: 2 }] }), { tenant: "acme" }),
      { queue: "invoices", concurrencyKey: "customer:7", uniqueKey: "invoice:42", processIn: "1h", maxRetry: 3 },
    );
    await d.sdk.client.enqueue(newTask("invoice:render", json({ invoice: 43 })), { queue: "invoices" });

    const page = await d.open("#/tasks?queue=invoices&state=scheduled");
    const link = page.locator(`tr[data-task-id="${id}"] a`);
    await link.waitFor();
    expect(await page.locator("table.tasks tbody tr").count()).toBe(1); // only the scheduled one
    await d.screenshot(page, "tasks");
    await link.click();

    await hasText(page.locator(".task-title .badge"), "scheduled");
    expect(page.url()).toContain(`#/tasks/task?id=${encodeURIComponent(id)}`);
    const details = page.locator(".task-details");
    await details.getByText('"invoice": 42').waitFor(); // payload bytes shown as formatted JSON
    await details.getByText("customer:7").waitFor();
    await details.getByText("invoice:42").waitFor();
    await details.getByText("acme").waitFor();
    await details.getByText("0 failed of 4 allowed (max retry 3)").waitFor();
    expect(await page.locator('[data-action="retry"]').isDisabled()).toBe(true); // only for finished tasks
    await d.screenshot(page, "task");

    // Escape dismisses the dialog: nothing happens, focus goes back to the button.
    await page.locator('[data-action="cancel"]').click();
    await page.getByRole("dialog").waitFor();
    await page.keyboard.press("Escape");
    await page.getByRole("dialog").waitFor({ state: "detached" });
    expect(await page.evaluate<string | null>("document.activeElement?.getAttribute('data-action')")).toBe("cancel");
    expect((await d.sdk.client.getTask(id)).state).toBe("scheduled");

    await page.locator('[data-action="cancel"]').click();
    await answerDialog(page, "Cancel task");
    await hasText(page.locator(".task-title .badge"), "cancelled");
    const task = await d.sdk.client.getTask(id);
    expect(task.state).toBe("cancelled");
    expect(task.cancelReason).toBe("OPERATOR");
    await details.getByText("OPERATOR").waitFor();
  });

  it("tasks: pages through a queue with the server's page tokens", async () => {
    for (let i = 0; i < 25; i++) await d.sdk.client.enqueue(newTask("page", json({ i })), { queue: "paged" });
    const page = await d.open("#/tasks?queue=paged&state=pending&size=20");
    const rows = page.locator("table.tasks tbody tr");
    await page.getByRole("button", { name: "Next page" }).and(page.locator(":enabled")).waitFor();
    expect(await rows.count()).toBe(20);
    const first = await rows.first().getAttribute("data-task-id");

    await page.getByRole("button", { name: "Next page" }).click();
    await page.waitForURL(/&page=\d+/);
    await page.locator("table.tasks tbody tr:nth-child(5):last-child").waitFor();
    expect(await page.getByRole("button", { name: "Next page" }).isDisabled()).toBe(true);

    await page.getByRole("button", { name: "Previous page" }).click();
    await page.locator("table.tasks tbody tr:nth-child(20)").waitFor();
    expect(await rows.first().getAttribute("data-task-id")).toBe(first);
    expect(page.url()).not.toContain("page=");
  });

  it("shows the server's own words when it rejects an input", async () => {
    const page = await d.open("#/concurrency");
    await page.getByLabel("Queue").fill("reports");
    await page.getByLabel("Max running per key").fill("0");
    await page.getByRole("button", { name: "Set limit" }).click();
    await page.getByRole("alert").filter({ hasText: "max: must be at least 1, got 0" }).waitFor();
    expect(await page.getByLabel("Max running per key").getAttribute("aria-invalid")).toBe("true");

    await page.getByLabel("Queue").fill("bad queue!");
    await page.getByLabel("Max running per key").fill("2");
    await page.getByRole("button", { name: "Set limit" }).click();
    await page.getByRole("alert").filter({ hasText: 'queue: invalid queue name "bad queue!"' }).waitFor();
    expect(await page.getByLabel("Queue").getAttribute("aria-invalid")).toBe("true");
    await d.screenshot(page, "error");

    const tasks = await d.open("#/tasks?queue=no%20spaces");
    await tasks.getByRole("alert").filter({ hasText: 'invalid queue name "no spaces"' }).waitFor();
    const missing = await d.open("#/tasks/task?id=no-such-task");
    await missing.getByRole("alert").filter({ hasText: 'task "no-such-task" not found' }).waitFor();
  });

  it("rate limits: shows the server default, sets and clears an override", async () => {
    const page = await d.open("#/rate-limits");
    await hasText(page.locator("[data-default-limit]"), "unlimited");
    await page.getByLabel("Queue").fill("webhooks");
    await page.getByLabel("Dispatches per second").fill("20");
    await page.getByLabel("Burst").fill("5");
    await page.getByRole("button", { name: "Set rate limit" }).click();
    const row = page.locator('tr[data-queue="webhooks"]');
    await hasText(row.locator('td[data-col="rate"]'), "20");
    await hasText(row.locator('td[data-col="burst"]'), "5");
    const listed = JSON.parse(await d.cli("ratelimit", "ls", "--json")) as { limits: Array<{ queue: string; ratePerSec: number; burst: number }> };
    expect(listed.limits).toContainEqual(expect.objectContaining({ queue: "webhooks", ratePerSec: 20, burst: 5 }));
    await d.screenshot(page, "rate-limits");

    await page.getByLabel("Dispatches per second").fill("0");
    await page.getByRole("button", { name: "Set rate limit" }).click();
    await page.getByRole("alert").filter({ hasText: "rate_per_sec: must be greater than 0, got 0" }).waitFor();

    await row.getByRole("button", { name: "Clear rate limit of webhooks" }).click();
    await answerDialog(page, "Clear rate limit");
    await page.getByText("No overrides: every queue uses the server default.").waitFor();
    const after = JSON.parse(await d.cli("ratelimit", "ls", "--json")) as { limits: Array<{ queue: string }> };
    expect(after.limits.map((l) => l.queue)).not.toContain("webhooks");
  });

  it("every tab is a link and a keyboard stop", async () => {
    const page = await d.open("#/tasks?queue=emails&state=pending");
    expect(await page.locator('nav[aria-label="Sections"] a[aria-current="page"]').textContent()).toBe("Tasks");
    await page.locator('nav[aria-label="Sections"] a', { hasText: "Rate limits" }).focus();
    await page.keyboard.press("Enter");
    await page.waitForURL(/#\/rate-limits$/);
    await hasText(page.locator("main h1"), "Rate limits");
    expect(await page.evaluate<string>("document.activeElement?.tagName")).toBe("H1"); // focus moved to the new view
    expect(await page.title()).toBe("Rate limits · conveyor");
    await page.goBack();
    await page.waitForURL(/#\/tasks\?queue=emails&state=pending$/);
    expect(await page.getByLabel("Queue").inputValue()).toBe("emails");
  });

  it("a stopped node shows the unreachable banner, which goes away when the node is back", async () => {
    let other = await NodeProcess.start();
    try {
      const page = await d.open("", WIDE, other);
      const banner = page.locator("#conn-banner");
      await page.locator("#live-status", { hasText: "Live" }).waitFor();
      expect(await banner.isHidden()).toBe(true);

      await other.stop();
      await banner.getByText("Cannot reach the node").waitFor();
      expect(await banner.textContent()).toContain(other.httpAddress);
      await d.screenshot(page, "unreachable");

      other = await other.restart();
      await banner.waitFor({ state: "hidden" });
      await page.locator("#live-status", { hasText: "Live" }).waitFor();
    } finally {
      await other.stop();
      other.cleanup();
    }
  });
});
