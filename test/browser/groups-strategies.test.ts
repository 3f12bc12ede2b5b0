/**
 * The dashboard's Groups and Strategies tabs end to end: headless Debian Chromium against
 * a real conveyord, the SDK to enqueue grouped tasks and connect a batch worker, the CLI
 * to cross-check what the page set. Needs `npm run build` and /usr/bin/chromium (the
 * tests fail without it, they do not skip). Screenshots land in test-output/screenshots/.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Mux, json, newTask } from "../../src/index.js";
import { Dashboard, NARROW, answerDialog, focusedField, focusedText, hasText, pageOverflow } from "../support/dashboard.js";

let d: Dashboard;

beforeAll(async () => {
  // A full group fires (and shows as waiting for a worker) in the turn that fills it.
  d = await Dashboard.start();
});

afterAll(async () => {
  await d?.close();
});

afterEach(() => {
  if (!d) return;
  expect(d.takeProblems(), "the page loaded only from the node and raised no errors").toEqual([]);
});

/** The JSON API's dialect, which `--json` prints: int64 as strings, enums by their proto names. */
interface PlainGroupConfig { queue: string; group: string; maxSize: number; maxDelayMs: string; graceMs: string }
interface PlainRule { name: string; expression: string; maxRuns: number; maxRunsExpression: string; strategy: string }

describe("groups tab", () => {
  it("sets a group override and a queue default, clears them after a confirmation; the CLI agrees", async () => {
    const page = await d.open("#/groups");
    const server = page.locator("table.group-configs tr[data-server-default]");
    await hasText(server.locator('td[data-col="max-size"]'), "100");
    await hasText(server.locator('td[data-col="max-delay"]'), "1m");
    await hasText(server.locator('td[data-col="grace"]'), "10s");
    await page.getByText("No overrides: every group uses the server default.").waitFor();

    const form = page.getByRole("form", { name: "Set group thresholds" });
    await form.getByLabel("Queue", { exact: true }).fill("digests");
    await form.getByLabel("Group", { exact: true }).fill("weekly");
    await form.getByLabel("Max size", { exact: true }).fill("20");
    await form.getByLabel("Max delay", { exact: true }).fill("2m");
    await form.getByLabel("Grace", { exact: true }).fill("5s");
    await form.getByRole("button", { name: "Set thresholds" }).click();
    await page.getByText("Queue digests, group weekly: max size 20, max delay 2m, grace 5s (applies now).").waitFor();
    const weekly = page.locator('table.group-configs tr[data-queue="digests"][data-group="weekly"]');
    await hasText(weekly.locator('td[data-col="max-size"]'), "20");
    await hasText(weekly.locator('td[data-col="max-delay"]'), "2m");
    await hasText(weekly.locator('td[data-col="grace"]'), "5s");

    // No group: the queue-wide default.
    await form.getByLabel("Group", { exact: true }).fill("");
    await form.getByLabel("Max size", { exact: true }).fill("50");
    await form.getByLabel("Max delay", { exact: true }).fill("1m30s");
    await form.getByLabel("Grace", { exact: true }).fill("500ms");
    await form.getByRole("button", { name: "Set thresholds" }).click();
    const queueDefault = page.locator('table.group-configs tr[data-queue="digests"][data-group=""]');
    await hasText(queueDefault.locator('td[data-col="group"]'), "(queue default)");
    await hasText(queueDefault.locator('td[data-col="max-delay"]'), "1m30s");
    await hasText(queueDefault.locator('td[data-col="grace"]'), "500ms");

    const listed = JSON.parse(await d.cli("group", "ls", "--json")) as { configs: PlainGroupConfig[]; serverDefault: PlainGroupConfig };
    expect(listed.configs).toContainEqual({ queue: "digests", group: "weekly", maxSize: 20, maxDelayMs: "120000", graceMs: "5000" });
    expect(listed.configs).toContainEqual({ queue: "digests", group: "", maxSize: 50, maxDelayMs: "90000", graceMs: "500" });
    const table = await d.cli("group", "ls");
    expect(table).toMatch(/digests\s+│?\s*weekly\s+│?\s*20\s+│?\s*2m\s+│?\s*5s/);
    expect(table).toMatch(/digests\s+│?\s*\(queue default\)\s+│?\s*50\s+│?\s*1m30s\s+│?\s*500ms/);
    await d.screenshot(page, "groups-overrides");

    // Edit fills the form from the row.
    await weekly.getByRole("button", { name: "Edit thresholds of group weekly in digests" }).click();
    expect(await form.getByLabel("Max delay", { exact: true }).inputValue()).toBe("2m");
    expect(await form.getByLabel("Group", { exact: true }).inputValue()).toBe("weekly");

    // Escape dismisses: nothing changes and the keyboard is back on the button.
    await weekly.getByRole("button", { name: "Clear thresholds of group weekly in digests" }).click();
    await page.getByRole("dialog").waitFor();
    await page.keyboard.press("Escape");
    await page.getByRole("dialog").waitFor({ state: "detached" });
    expect(await focusedText(page)).toBe("Clear thresholds of group weekly in digests");

    await weekly.getByRole("button", { name: "Clear thresholds of group weekly in digests" }).click();
    const said = await answerDialog(page, "Clear thresholds");
    expect(said).toContain("Group weekly of digests falls back to the default of digests (max size 50, max delay 1m30s, grace 500ms).");
    await weekly.waitFor({ state: "detached" });
    const after = JSON.parse(await d.cli("group", "ls", "--json")) as { configs: PlainGroupConfig[] };
    expect(after.configs.map((c) => `${c.queue}/${c.group}`)).toEqual(["digests/"]);

    await queueDefault.getByRole("button", { name: "Clear default thresholds of digests" }).click();
    expect(await answerDialog(page, "Clear thresholds")).toContain("fall back to the server default (max size 100, max delay 1m, grace 10s)");
    await page.getByText("No overrides: every group uses the server default.").waitFor();
    expect(await d.cli("group", "ls")).not.toContain("digests");
  });

  it("shows the dashboard's and the server's words for bad thresholds", async () => {
    const page = await d.open("#/groups?queue=digests");
    const form = page.getByRole("form", { name: "Set group thresholds" });
    expect(await form.getByLabel("Queue", { exact: true }).inputValue()).toBe("digests"); // linkable
    await form.getByLabel("Max size", { exact: true }).fill("10");
    await form.getByLabel("Max delay", { exact: true }).fill("2 minutes");
    await form.getByLabel("Grace", { exact: true }).fill("5s");
    await form.getByRole("button", { name: "Set thresholds" }).click();
    await page.getByRole("alert").filter({ hasText: 'max delay: invalid duration "2 minutes": use e.g. 500ms, 5s, 2m, 1h, 1d' }).waitFor();
    expect(await form.getByLabel("Max delay", { exact: true }).getAttribute("aria-invalid")).toBe("true");

    await form.getByLabel("Max delay", { exact: true }).fill("2m");
    await form.getByLabel("Max size", { exact: true }).fill("0");
    await form.getByRole("button", { name: "Set thresholds" }).click();
    await page.getByRole("alert").filter({ hasText: "config.max_size: must be at least 1, got 0" }).waitFor();
    expect(await form.getByLabel("Max size", { exact: true }).getAttribute("aria-invalid")).toBe("true");
    expect(await form.getByLabel("Max delay", { exact: true }).getAttribute("aria-invalid")).toBeNull();

    await form.getByLabel("Max size", { exact: true }).fill("10");
    await form.getByLabel("Grace", { exact: true }).fill("");
    await form.getByRole("button", { name: "Set thresholds" }).click();
    await page.getByRole("alert").filter({ hasText: "config.grace_ms: must be above zero, got 0" }).waitFor();
    expect(await form.getByLabel("Grace", { exact: true }).getAttribute("aria-invalid")).toBe("true");
    expect(JSON.parse(await d.cli("group", "ls", "--json"))).toMatchObject({ configs: [] });
  });

  it("shows live groups with their size, fired batches, and warns while no worker can take them", async () => {
    // Long thresholds keep digests-live aggregating; digests-full fires at 2 members.
    const slow = { maxDelayMs: 3_600_000n, graceMs: 3_600_000n };
    await d.sdk.admin.setGroupConfig({ config: { queue: "digests-live", group: "", maxSize: 100, ...slow } });
    await d.sdk.admin.setGroupConfig({ config: { queue: "digests-full", group: "", maxSize: 2, ...slow } });
    for (let i = 0; i < 3; i++) await d.sdk.client.enqueue(newTask("digest:send", json({ user: 1, i })), { queue: "digests-live", group: "user:1" });
    await d.sdk.client.enqueue(newTask("digest:send", json({ user: 2 })), { queue: "digests-live", group: "user:2" });
    for (let i = 0; i < 2; i++) await d.sdk.client.enqueue(newTask("digest:full", json({ i })), { queue: "digests-full", group: "all" });

    const page = await d.open("#/groups");
    const live = page.locator("table.live-groups");
    const user1 = live.locator('tr[data-queue="digests-live"][data-group="user:1"]');
    await hasText(user1.locator('td[data-col="size"]'), "3");
    await hasText(user1.locator('td[data-col="type"]'), "digest:send");
    await hasText(user1.locator('td[data-col="state"]'), "aggregating");
    await hasText(user1.locator('td[data-col="config"] [aria-hidden="true"]'), "100 · 1h · 1h");
    await hasText(user1.locator('td[data-col="config"] .visually-hidden'), "max size 100, max delay 1h, grace 1h");
    expect(await user1.locator('td[data-col="fires"]').textContent()).toMatch(/^in (59 min|1 h)/);
    expect(await user1.locator('td[data-col="first"]').textContent()).toMatch(/^(now|\d+ s ago)$/);
    await hasText(live.locator('tr[data-group="user:2"] td[data-col="size"]'), "1");
    // A member's queue links to its aggregating tasks.
    expect(await user1.getByRole("link", { name: "digests-live" }).getAttribute("href")).toBe("#/tasks?queue=digests-live&state=aggregating");

    const full = live.locator('tr[data-queue="digests-full"][data-group="all"]');
    await hasText(full.locator('td[data-col="state"]'), "fired, waiting for a worker");
    await hasText(full.locator('td[data-col="size"]'), "2");

    // No worker has a batch handler: a warning for each queue and type, and in each row.
    const warning = (type: string, queue: string) => `No connected worker has a batch handler for ${type} on ${queue}`;
    const alerts = page.getByRole("alert");
    await alerts.filter({ hasText: warning("digest:send", "digests-live") }).waitFor();
    await alerts.filter({ hasText: warning("digest:full", "digests-full") }).waitFor();
    // In the row: "none", with the sentence for screen readers.
    await hasText(user1.locator('td[data-col="worker"] strong'), "none");
    await hasText(user1.locator('td[data-col="worker"] .visually-hidden'), `: ${warning("digest:send", "digests-live").replace(/^N/, "n")}`);

    const cliLive = JSON.parse(await d.cli("group", "ls", "--live", "--json")) as { groups: Array<{ queue: string; group: string; size: number; state: string; workerAvailable: boolean }> };
    expect(cliLive.groups).toContainEqual(expect.objectContaining({ queue: "digests-live", group: "user:1", size: 3, state: "GROUP_STATE_AGGREGATING", workerAvailable: false }));
    expect(cliLive.groups).toContainEqual(expect.objectContaining({ queue: "digests-full", group: "all", size: 2, state: "GROUP_STATE_READY" }));
    await d.screenshot(page, "groups");

    // A worker with a batch handler for digest:send connects to digests-live: its warning
    // goes away live (the groups still aggregate), the other stays.
    d.sdk.worker(new Mux().handleBatch("digest:send", () => {}), { queues: ["digests-live"] });
    await hasText(user1.locator('td[data-col="worker"]'), "connected");
    await alerts.filter({ hasText: warning("digest:send", "digests-live") }).waitFor({ state: "detached" });
    await alerts.filter({ hasText: warning("digest:full", "digests-full") }).waitFor();
    await hasText(user1.locator('td[data-col="size"]'), "3");

    const narrow = await d.open("#/groups", NARROW);
    await hasText(narrow.locator('table.live-groups tr[data-group="user:1"] td[data-col="size"]'), "3");
    expect(await pageOverflow(narrow), "no horizontal scrolling of the page on a narrow window").toBeLessThanOrEqual(0);
    await d.screenshot(narrow, "groups-narrow");
  });
});

describe("strategies tab", () => {
  it("sets a type's rules with the rule builder, the CLI lists them, clears them after a confirmation", async () => {
    const page = await d.open("#/strategies");
    await page.getByText("No concurrency rules: no task type is limited.", { exact: false }).waitFor();

    const form = page.getByRole("form", { name: "Set the concurrency rules of a task type" });
    await form.getByLabel("Task type").fill("report:build");
    const rule1 = form.getByRole("group", { name: "Rule 1" });
    await rule1.getByLabel("Key expression").fill("input.user_id");
    await rule1.getByLabel("Max runs").fill("2");
    await rule1.getByLabel("Strategy").selectOption({ label: "GROUP_ROUND_ROBIN" });
    expect(await rule1.getByRole("button", { name: "Remove rule 1" }).isDisabled()).toBe(true); // at least one rule

    // A second rule, typed from the keyboard: "Add a rule" puts the focus in it.
    await form.getByRole("button", { name: "Add a rule" }).click();
    const rule2 = form.getByRole("group", { name: "Rule 2" });
    expect(await focusedField(page)).toBe("rules[1].expression");
    await page.keyboard.type("'global'");
    await rule2.getByLabel("Max runs").fill("input.tier == 'premium' ? 10 : 1");
    await rule2.getByLabel("Strategy").selectOption({ label: "CANCEL_NEWEST" });
    await rule2.getByLabel("Name").fill("reports-global");

    // Chain order: move rule 2 up and back; the focus follows the moved rule.
    await rule2.getByRole("button", { name: "Move up rule 2" }).click();
    expect(await rule1.getByLabel("Key expression").inputValue()).toBe("'global'");
    expect(await focusedText(page)).toBe("Move down rule 1");
    await page.keyboard.press("Enter");
    expect(await rule1.getByLabel("Key expression").inputValue()).toBe("input.user_id");
    expect(await focusedText(page)).toBe("Move up rule 2");

    await form.getByRole("button", { name: "Set rules" }).click();
    await page.getByText("Type report:build: 2 rules set; they apply to tasks enqueued from now on.").waitFor();
    const type = page.locator('table.strategies tbody[data-type="report:build"]');
    await hasText(type.locator('tr[data-rule="0"] td[data-col="expression"]'), "input.user_id");
    await hasText(type.locator('tr[data-rule="0"] td[data-col="max-runs"]'), "2");
    await hasText(type.locator('tr[data-rule="0"] td[data-col="strategy"]'), "GROUP_ROUND_ROBIN");
    await hasText(type.locator('tr[data-rule="1"] td[data-col="name"]'), "reports-global");
    await hasText(type.locator('tr[data-rule="1"] td[data-col="max-runs"]'), "input.tier == 'premium' ? 10 : 1");
    await hasText(type.locator('tr[data-rule="1"] td[data-col="strategy"]'), "CANCEL_NEWEST");
    await hasText(type.locator('td[data-col="source"]'), "operator");

    const listed = JSON.parse(await d.cli("strategy", "ls", "--json")) as { types: Array<{ type: string; source: string; rules: PlainRule[] }> };
    expect(listed.types).toEqual([expect.objectContaining({
      type: "report:build",
      source: "operator",
      rules: [
        { name: "", expression: "input.user_id", maxRuns: 2, maxRunsExpression: "", strategy: "LIMIT_STRATEGY_GROUP_ROUND_ROBIN" },
        { name: "reports-global", expression: "'global'", maxRuns: 0, maxRunsExpression: "input.tier == 'premium' ? 10 : 1", strategy: "LIMIT_STRATEGY_CANCEL_NEWEST" },
      ],
    })]);
    const table = await d.cli("strategy", "ls");
    expect(table).toMatch(/report:build\s+│?\s*0\s+│?\s*-\s+│?\s*input\.user_id\s+│?\s*2\s+│?\s*GROUP_ROUND_ROBIN/);
    expect(table).toMatch(/1\s+│?\s*reports-global\s+│?\s*'global'\s+│?\s*input\.tier == 'premium' \? 10 : 1\s+│?\s*CANCEL_NEWEST/);
    await d.screenshot(page, "strategies");

    // Edit loads the type's rules into the builder; setting them again replaces the
    // existing rules, after a confirmation.
    await type.getByRole("button", { name: "Edit rules of report:build" }).click();
    expect(await focusedField(page)).toBe("rules[0].expression");
    expect(await rule2.getByLabel("Name").inputValue()).toBe("reports-global");
    await rule1.getByLabel("Max runs").fill("3");
    await form.getByRole("button", { name: "Set rules" }).click();
    expect(await answerDialog(page, "Replace rules")).toContain("report:build has 2 rules, set by operator");
    await hasText(type.locator('tr[data-rule="0"] td[data-col="max-runs"]'), "3");

    const narrow = await d.open("#/strategies", NARROW);
    await hasText(narrow.locator('table.strategies tbody[data-type="report:build"] td[data-col="source"]'), "operator");
    expect(await pageOverflow(narrow), "no horizontal scrolling of the page on a narrow window").toBeLessThanOrEqual(0);
    await d.screenshot(narrow, "strategies-narrow");

    const again = await d.open("#/strategies");
    await again.getByRole("button", { name: "Clear rules of report:build" }).click();
    expect(await answerDialog(again, "Cancel")).toContain("tasks already enqueued keep the rules they were enqueued with");
    expect(await d.cli("strategy", "ls")).toContain("report:build");
    await again.getByRole("button", { name: "Clear rules of report:build" }).click();
    await answerDialog(again, "Clear rules");
    await again.getByText("No concurrency rules: no task type is limited.", { exact: false }).waitFor();
    expect(await focusedText(again)).toBe("Rules by task type"); // the keyboard stays in the tab
    expect((await d.cli("strategy", "ls")).trim()).toBe("no concurrency rules");
  });

  it("shows the server's words, naming the rule and position, when an expression does not compile", async () => {
    const page = await d.open("#/strategies");
    const form = page.getByRole("form", { name: "Set the concurrency rules of a task type" });
    await form.getByLabel("Task type").fill("bad:type");
    const rule1 = form.getByRole("group", { name: "Rule 1" });
    await rule1.getByLabel("Key expression").fill("input.user_id +");
    await rule1.getByLabel("Max runs").fill("1");
    await form.getByRole("button", { name: "Set rules" }).click();
    const alert = page.getByRole("alert").filter({ hasText: "rules[0].expression: does not compile: <input>:1:15:" });
    await alert.waitFor();
    expect(await alert.textContent()).toContain("(rule 1 in the form)");
    expect(await rule1.getByLabel("Key expression").getAttribute("aria-invalid")).toBe("true");
    expect(await focusedField(page)).toBe("rules[0].expression");
    await d.screenshot(page, "strategies-error");

    // The limit's expression, in the second rule.
    await rule1.getByLabel("Key expression").fill("input.user_id");
    await form.getByRole("button", { name: "Add a rule" }).click();
    const rule2 = form.getByRole("group", { name: "Rule 2" });
    await rule2.getByLabel("Key expression").fill("'all'");
    await rule2.getByLabel("Max runs").fill("input.tier == 'premium' ? 10 :");
    await form.getByRole("button", { name: "Set rules" }).click();
    await page.getByRole("alert").filter({ hasText: /rules\[1\]\.max_runs_expression: does not compile: <input>:1:\d+/ }).waitFor();
    expect(await rule2.getByLabel("Max runs").getAttribute("aria-invalid")).toBe("true");
    expect(await rule1.getByLabel("Key expression").getAttribute("aria-invalid")).toBeNull();

    // A limit that is a number must be a whole one; 0 is the server's to refuse.
    await rule2.getByLabel("Max runs").fill("0");
    await form.getByRole("button", { name: "Set rules" }).click();
    await page.getByRole("alert").filter({ hasText: "rules[1].max_runs: must be at least 1 (or give max_runs_expression), got 0" }).waitFor();
    await rule2.getByLabel("Max runs").fill("1.5");
    await form.getByRole("button", { name: "Set rules" }).click();
    await page.getByRole("alert").filter({ hasText: "rules[1].max_runs: must be a whole number of at least 1 or a CEL expression, got 1.5" }).waitFor();
    expect(await d.cli("strategy", "ls")).not.toContain("bad:type");
  });
});
