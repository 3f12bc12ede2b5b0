/**
 * Dashboard, issue 11 item 14, in headless Chromium against a real node: the activity
 * chart and failure rate have history on page load (GetActivity) and count retries;
 * the task list's columns fit the state browsed; times carry their zone; the main views
 * need no sideways scrolling at 390 px; navigating away closes an open confirmation.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask, skipRetry } from "../../src/index.js";
import { deferred } from "../support/sdk.js";
import { Dashboard, NARROW, hasText, pageOverflow } from "../support/dashboard.js";

let d: Dashboard;
/** A local time with its zone, as the dashboard prints it ("2026-11-30 22:45:04 UTC"). */
const ZONED = /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (UTC|GMT[+-]\d{1,2}(:\d\d)?|[A-Z]{2,5})/;

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

describe("dashboard history and state columns", () => {
  it("overview: the chart and the failure rate have history on page load, and retries count as failures", async () => {
    // All of it before the page opens: 2 completed (one after a retry), 1 archived.
    let flakyRuns = 0;
    d.sdk.worker(new Mux()
      .handle("ok", async () => {})
      .handle("flaky", async () => {
        flakyRuns += 1;
        if (flakyRuns === 1) throw new Error("first attempt fails");
      })
      .handle("bad", async () => {
        throw skipRetry(new Error("bad input"));
      }), { queues: ["hist"] });
    const ids = [
      (await d.sdk.client.enqueue(newTask("ok", json({})), { queue: "hist" })).id,
      (await d.sdk.client.enqueue(newTask("flaky", json({})), { queue: "hist", backoff: { base: "10ms", max: "10ms" } })).id,
    ];
    const { id: bad } = await d.sdk.client.enqueue(newTask("bad", json({})), { queue: "hist" });
    for (const id of ids) await d.sdk.waitForState(id, "completed");
    await d.sdk.waitForState(bad, "archived");

    const page = await d.open("#/overview?chart=hist");
    // 1 retried + 1 archived of 4 attempt outcomes (2 completed).
    await hasText(page.locator('[data-card="failures"] .card-value'), "50 %");
    await page.locator('[data-card="failures"] .card-note').getByText("2 failed attempts (retried or archived) of 4").waitFor();
    for (const series of ["enqueued", "completed", "retried", "archived"]) {
      await page.locator(`.chart .series.${series} polyline`).first().waitFor();
    }
    const label = (await page.locator(".chart").getAttribute("aria-label")) ?? "";
    expect(label).toMatch(/^Activity of hist per minute over the last hour/);
    await d.screenshot(page, "overview-history");
  });

  it("tasks: columns fit the state browsed (next retry, runs at, worker and start, group), times with their zone", async () => {
    const started = deferred();
    const release = deferred();
    d.sdk.worker(new Mux()
      .handle("hold", async () => {
        started.resolve();
        await release.promise;
      })
      .handle("fail", async () => {
        throw new Error("try again later");
      }), { queues: ["cols"], workerId: "cols-worker" });
    const { id: held } = await d.sdk.client.enqueue(newTask("hold", json({})), { queue: "cols" });
    await started.promise;
    const { id: failing } = await d.sdk.client.enqueue(newTask("fail", json({})), { queue: "cols", backoff: { base: "1h", max: "1h" } });
    await d.sdk.waitForState(failing, "retry");
    const { id: later } = await d.sdk.client.enqueue(newTask("later", json({})), { queue: "cols", processIn: "2h" });
    const { id: grouped } = await d.sdk.client.enqueue(newTask("digest", json({})), { queue: "cols-groups", group: "weekly" });

    const page = await d.open("#/tasks?queue=cols&state=active");
    const active = page.locator(`tr[data-task-id="${held}"]`);
    await hasText(active.locator('td[data-col="worker"]'), "cols-worker");
    await active.locator('td[data-col="started"]').getByText(ZONED).waitFor();
    await active.locator('td[data-col="running-for"]').waitFor();
    expect(await page.locator("table.tasks thead th").allTextContents()).toEqual(
      ["ID", "Type", "State", "Priority", "Retried", "Worker", "Started", "Running for"]);

    await page.goto(`${page.url().split("#")[0]}#/tasks?queue=cols&state=retry`);
    const retry = page.locator(`tr[data-task-id="${failing}"]`);
    await retry.locator('td[data-col="next-retry"]').getByText(/in \d+ min/).waitFor(); // an hour's backoff, half of it jittered
    await retry.locator('td[data-col="next-retry"]').getByText(ZONED).waitFor();
    await hasText(retry.locator('td[data-col="last-error"]'), "try again later");

    await page.goto(`${page.url().split("#")[0]}#/tasks?queue=cols&state=scheduled`);
    await page.locator(`tr[data-task-id="${later}"] td[data-col="runs-at"]`).getByText(/in (1 h 59 min|2 h)/).waitFor();

    await page.goto(`${page.url().split("#")[0]}#/tasks?queue=cols-groups&state=aggregating`);
    await hasText(page.locator(`tr[data-task-id="${grouped}"] td[data-col="group"]`), "weekly");

    // Every state at once: each row says what its time means.
    await page.goto(`${page.url().split("#")[0]}#/tasks?queue=cols`);
    await page.locator(`tr[data-task-id="${failing}"] td[data-col="when"]`).getByText(/^retries /).waitFor();
    await page.locator(`tr[data-task-id="${held}"] td[data-col="when"]`).getByText(/^started /).waitFor();
    await d.screenshot(page, "tasks-all-states");

    // The header's "updated" time carries the zone too.
    await page.getByText(/updated \d\d:\d\d:\d\d (UTC|GMT|[A-Z]{2,5})/).waitFor();
    release.resolve();
  });

  it("the main views need no sideways scrolling at 390 px", async () => {
    const { id } = await d.sdk.client.enqueue(newTask("narrow:check", json({ a: 1 })), { queue: "narrow", processIn: "1h", concurrencyKey: "k" });
    for (const view of ["#/overview", "#/queues", "#/tasks?queue=narrow", "#/tasks?queue=narrow&state=scheduled",
      `#/tasks/task?id=${encodeURIComponent(id)}`, "#/workers", "#/concurrency", "#/rate-limits", "#/groups", "#/strategies", "#/cluster"]) {
      const page = await d.open(view, NARROW);
      await page.waitForLoadState("networkidle"); // the view's first answers are drawn
      expect(await pageOverflow(page), `no horizontal scrolling of ${view} at 390 px`).toBeLessThanOrEqual(0);
    }
  }, 120_000);

  it("navigating away closes an open confirmation, and nothing happens", async () => {
    const { id } = await d.sdk.client.enqueue(newTask("nav:check", json({})), { queue: "nav", processIn: "1h" });
    const page = await d.open(`#/tasks/task?id=${encodeURIComponent(id)}`);
    await page.locator('[data-action="cancel"]').click();
    await page.getByRole("dialog").waitFor();
    await page.evaluate("location.hash = '#/queues'");
    await page.getByRole("dialog").waitFor({ state: "detached" });
    await page.locator("main h1", { hasText: "Queues" }).waitFor();
    // The Back button too.
    await page.goBack();
    await page.locator('[data-action="cancel"]').click();
    await page.getByRole("dialog").waitFor();
    await page.goBack();
    await page.getByRole("dialog").waitFor({ state: "detached" });
    expect((await d.sdk.client.getTask(id)).state).toBe("scheduled");
  });
});
