/**
 * The dashboard's attempt history and bulk actions (issue 11 items 9-10): headless
 * Debian Chromium against a real conveyord, the SDK to make the work, the CLI and gRPC to
 * cross-check. Needs `npm run build` and /usr/bin/chromium.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { BulkAction } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { TaskState } from "../../src/gen/conveyor/v1/task_pb.js";
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

describe("dashboard: task page", () => {
  it("shows a task's attempts: two failures with their errors and stacks, then the success, with the worker", async () => {
    let calls = 0;
    const mux = new Mux().handle("flaky", async () => {
      calls += 1;
      if (calls < 3) throw new Error(`boom ${calls}`, { cause: new Error("upstream reset") });
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
      expect((await row.locator("td.error-text .error-message").textContent())?.trim()).toBe(error);
      expect(await row.textContent()).toContain("web-worker");
      // A failure's stack is folded in its row: its own frames, then its cause.
      const stack = row.locator("td.error-text details.stack pre");
      if (error === "") expect(await stack.count()).toBe(0);
      else expect(await stack.textContent()).toMatch(new RegExp(`^Error: ${error}\n {4}at [^]*\nCaused by: Error: upstream reset\n`));
    }
    // The last error's section shows where it came from, unfolded.
    expect(await page.locator('pre.stack[aria-label="Stack of attempt 2"]').textContent()).toMatch(/^Error: boom 2\n {4}at /);
    await d.screenshot(page, "task-attempts");
  });
});

describe("dashboard: bulk actions", () => {
  it("offers the actions that apply to the chosen state, confirms with the count, and acts on every task", async () => {
    const queue = "web-bulk";
    for (let i = 0; i < 7; i++) await d.sdk.client.enqueue(newTask("t", json({ i })), { queue });
    await d.sdk.admin.bulkTaskAction({ queue, state: TaskState.PENDING, action: BulkAction.ARCHIVE });

    const page = await d.open(`#/tasks?queue=${queue}&state=archived`);
    await hasText(page.locator('a.pill[aria-current="page"] .pill-count'), "7");
    const bar = page.locator(".bulk-actions");
    await bar.locator('[data-bulk="retry"]').waitFor();
    expect(await bar.locator("button").evaluateAll((bs) => bs.map((b) => b.getAttribute("data-bulk")))).toEqual(["retry", "delete"]);

    await bar.locator('[data-bulk="retry"]').click();
    const text = await answerDialog(page, "Retry 7 tasks");
    expect(text).toContain("7 archived tasks in web-bulk will be retried.");
    await page.getByText("Retry all: 7 tasks retried.").waitFor();
    expect(await d.cli("task", "ls", queue, "--state", "pending")).toContain("t ");
    expect(await d.sdk.counts(queue)).toMatchObject({ pending: 7, archived: 0 });

    // Pending tasks can be archived, deleted or cancelled in bulk, not retried.
    await page.locator('a.pill[href*="state=pending"]').click();
    await bar.locator('[data-bulk="cancel"]').waitFor();
    expect(await bar.locator("button").evaluateAll((bs) => bs.map((b) => b.getAttribute("data-bulk")))).toEqual(["cancel", "archive", "delete"]);
    await d.screenshot(page, "tasks-bulk");
  });
});

describe("dashboard: queues", () => {
  it("removes a queue with no unfinished task after a confirmation that counts its finished tasks; a busy queue's Remove is disabled", async () => {
    for (let i = 0; i < 2; i++) await d.sdk.client.enqueue(newTask("t", json({ i })), { queue: "web-rm" });
    await d.sdk.admin.bulkTaskAction({ queue: "web-rm", state: TaskState.PENDING, action: BulkAction.CANCEL });
    await d.sdk.client.enqueue(newTask("t", json({})), { queue: "web-rm-busy" });

    const page = await d.open("#/queues");
    const busy = page.locator('tr[data-queue="web-rm-busy"]');
    expect(await busy.getByRole("button", { name: "Remove web-rm-busy" }).isDisabled()).toBe(true);

    const row = page.locator('tr[data-queue="web-rm"]');
    await row.getByRole("button", { name: "Remove web-rm" }).click();
    const text = await answerDialog(page, "Remove web-rm");
    expect(text).toContain("with its 2 finished tasks");
    await page.getByText("Queue web-rm removed (2 finished tasks deleted).").waitFor();
    await row.waitFor({ state: "detached" });
    expect(await d.cli("queue", "ls")).not.toMatch(/web-rm\s/);
  });
});
