/**
 * The dashboard's Workers tab and an active task's holder, end to end: headless Chromium
 * against a real conveyord with two SDK workers of different queues and types.
 * Needs `npm run build` and /usr/bin/chromium (the tests fail without it).
 */
import { hostname } from "node:os";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { deferred } from "../support/sdk.js";
import { Dashboard, NARROW, hasText, pageOverflow } from "../support/dashboard.js";

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

describe("workers tab", () => {
  it("lists both workers with their queues, types and held tasks; the task page names the holder", async () => {
    const started = deferred();
    const release = deferred();
    d.sdk.worker(new Mux().handle("email:send", async () => {
      started.resolve();
      await release.promise;
    }), { queues: ["mail"], concurrency: 3, workerId: "mail-worker" });
    d.sdk.worker(new Mux().handle("img:resize", async () => {}), { queues: ["images", "thumbs"], concurrency: 5, workerId: "image-worker" });
    const { id } = await d.sdk.client.enqueue(newTask("email:send", json({ to: "ada" })), { queue: "mail" });
    await started.promise;

    const page = await d.open("#/workers");
    const mail = page.locator('tr[data-worker="mail-worker"]');
    const image = page.locator('tr[data-worker="image-worker"]');
    await hasText(mail.locator('td[data-col="queues"]'), "mail");
    await hasText(mail.locator('td[data-col="types"]'), "email:send");
    await hasText(mail.locator('td[data-col="in-flight"]'), "1");
    await hasText(mail.locator('td[data-col="concurrency"]'), "3");
    await hasText(mail.locator('td[data-col="host"]'), hostname());
    await hasText(image.locator('td[data-col="queues"]'), "images, thumbs");
    await hasText(image.locator('td[data-col="types"]'), "img:resize");
    await hasText(image.locator('td[data-col="in-flight"]'), "0");
    await hasText(image.locator('td[data-col="state"]'), "polling");
    expect(await page.locator("tr[data-worker]").count()).toBe(2);
    await d.screenshot(page, "workers");

    const narrow = await d.open("#/workers", NARROW);
    await narrow.locator('tr[data-worker="mail-worker"]').waitFor();
    expect(await pageOverflow(narrow), "no horizontal scrolling of the page on a narrow window").toBeLessThanOrEqual(0);

    const task = await d.open(`#/tasks/task?id=${encodeURIComponent(id)}`);
    const holder = task.locator("dt", { hasText: "Held by worker" }).locator("xpath=following-sibling::dd[1]");
    await hasText(holder, "mail-worker");
    const since = task.locator("dt", { hasText: "Held since" }).locator("xpath=following-sibling::dd[1]");
    await since.getByText(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/).waitFor();
    release.resolve();
  });
});
