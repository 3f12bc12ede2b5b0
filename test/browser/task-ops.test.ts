/**
 * The dashboard's attempt history and bulk actions (issue 11 items 9-10): headless
 * Debian Chromium against a real conveyord, the SDK to make the work, the CLI and gRPC to
 * cross-check. Needs `npm run build` and /usr/bin/chromium.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { Dashboard, hasText } from "../support/dashboard.js";

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

describe("dashboard: task page", () => {
  it("shows a task's attempts: two failures with their errors, then the success, with the worker", async () => {
    let calls = 0;
    const mux = new Mux().handle("flaky", async () => {
      calls += 1;
      if (calls < 3) throw new Error(`boom ${calls}`);
    });
    const info = await d.sdk.client.enqueue(newTask("flaky", json({})), { queue: "web-attempts", backoff: { base: 10, max: 20 } });
    d.sdk.worker(mux, { queues: ["web-attempts"], workerId: "web-worker" });
    await d.sdk.waitForState(info.id, "completed");

    const page = await d.open(`#/tasks/task?id=${encodeURIComponent(info.id)}`);
    const rows = page.locator("table.attempts tbody tr");
    await hasText(page.locator('table.attempts tr[data-attempt="3"] td.outcome'), "succeeded");
    expect(await rows.count()).toBe(3);
    for (const [n, outcome, error] of [["1", "failed", "boom 1"], ["2", "failed", "boom 2"], ["3", "succeeded", ""]] as const) {
      const row = page.locator(`table.attempts tr[data-attempt="${n}"]`);
      expect((await row.locator("td.outcome").textContent())?.trim()).toBe(outcome);
      expect((await row.locator("td.error-text").textContent())?.trim()).toBe(error);
      expect(await row.textContent()).toContain("web-worker");
    }
    await d.screenshot(page, "task-attempts");
  });
});
