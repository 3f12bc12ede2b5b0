/**
 * The dashboard's Schedules tab end to end: headless Debian Chromium against a real
 * conveyord; the CLI cross-checks what the page set. Needs `npm run build` and
 * /usr/bin/chromium. Screenshots land in test-output/screenshots/.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Dashboard, answerDialog, hasText } from "../support/dashboard.js";

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

interface PlainSchedule { name: string; paused: boolean; cron?: string; intervalMs?: string; timeZone: string; skipIfRunning: boolean; lastTaskId: string; task: { queue: string; type: string } }

describe("schedules tab", () => {
  it("sets a schedule, shows its next tick and last task, pauses, resumes, runs it now and deletes it; the CLI agrees", async () => {
    const page = await d.open("#/schedules");
    await page.getByText("No schedules.").waitFor();
    const form = page.getByRole("form", { name: "Set a schedule" });
    await form.getByLabel("Queue", { exact: true }).fill("reports");
    await form.getByLabel("Name", { exact: true }).fill("nightly");
    await form.getByLabel("Task type", { exact: true }).fill("report:build");
    await form.getByLabel("Cron or interval", { exact: true }).fill("30 2 * * *");
    await form.getByLabel("Time zone", { exact: true }).fill("Europe/Berlin");
    await form.getByLabel("Skip while running", { exact: true }).check();
    await form.getByLabel("Payload (JSON)", { exact: true }).fill('{"full":true}');
    await form.getByRole("button", { name: "Set schedule" }).click();
    await page.getByText(/^Schedule nightly of queue reports: cron 30 2 \* \* \* \(Europe\/Berlin\), next tick \d{4}-/).waitFor();
    const row = page.locator('table.schedules tr[data-queue="reports"][data-name="nightly"]');
    await hasText(row.locator('td[data-col="status"]'), "active");
    await row.locator('td[data-col="next"]').filter({ hasText: /^\d{4}-\d\d-\d\d \d\d:30:00 \S+ \(in / }).waitFor();

    const [listed] = (JSON.parse(await d.cli("schedule", "ls", "--json")) as { schedules: PlainSchedule[] }).schedules;
    expect(listed).toMatchObject({ name: "nightly", cron: "30 2 * * *", timeZone: "Europe/Berlin", skipIfRunning: true, task: { queue: "reports", type: "report:build" } });

    await row.getByRole("button", { name: "Pause schedule nightly in reports" }).click();
    await hasText(row.locator('td[data-col="status"]'), "paused");
    await hasText(row.locator('td[data-col="next"]'), "—");
    await row.getByRole("button", { name: "Resume schedule nightly in reports" }).click();
    await hasText(row.locator('td[data-col="status"]'), "active");

    await row.getByRole("button", { name: "Run now schedule nightly in reports" }).click();
    const link = row.locator('td[data-col="last"] a');
    await link.filter({ hasText: /^schedule:nightly:now:\d+$/ }).waitFor();
    await row.locator('td[data-col="last"] .badge').filter({ hasText: /^(pending)$/ }).waitFor();
    const taskId = (await link.textContent())!;
    expect((await d.sdk.client.getTask(taskId)).type).toBe("report:build");
    await d.screenshot(page, "schedules");

    // A bad zone: the node's message, the field marked, nothing changed.
    await form.getByLabel("Time zone", { exact: true }).fill("Atlantis/Capital");
    await form.getByRole("button", { name: "Set schedule" }).click();
    await page.getByRole("alert").filter({ hasText: "schedule.time_zone" }).waitFor();
    expect(await form.getByLabel("Time zone", { exact: true }).getAttribute("aria-invalid")).toBe("true");
    expect(await d.cli("schedule", "ls")).toContain("Europe/Berlin");

    await row.getByRole("button", { name: "Delete schedule nightly in reports" }).click();
    expect(await answerDialog(page, "Delete schedule")).toContain("the tasks it already enqueued stay");
    await page.getByText("No schedules.").waitFor();
    expect(await d.cli("schedule", "ls")).toBe("no schedules\n");
  });
});
