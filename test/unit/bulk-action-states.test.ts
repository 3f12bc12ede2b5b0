/**
 * The (action, state) pairs of bulk actions are one list: the server's
 * BULK_ACTION_STATES. The dashboard (plain JS, which cannot import it) offers a bulk
 * button for a state when the single-task action of its ACTIONS list applies to that
 * state; this ties that list to the server's.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BULK_ACTION_STATES } from "../../src/grains/queue/bulk-actions.js";
import { FINISHED_STATES, TASK_STATES } from "../../src/grains/queue/task.js";
import { REPO_ROOT } from "../support/node-process.js";

/** The dashboard's ACTIONS: each id with its states, the expressions evaluated over the state lists. */
function dashboardActions(): Map<string, string[]> {
  const text = readFileSync(join(REPO_ROOT, "web/js/tabs/tasks.js"), "utf8");
  const block = /const ACTIONS = \[([\s\S]*?)\n\];/.exec(text)![1]!;
  const unfinished = TASK_STATES.filter((s) => !FINISHED_STATES.has(s));
  const out = new Map<string, string[]>();
  for (const m of block.matchAll(/id: "(\w+)"[\s\S]*?states: (.*?),\s*\n/g)) {
    // eslint-disable-next-line @typescript-eslint/no-implied-eval
    const states = new Function("STATES", "UNFINISHED", `return ${m[2]};`)(TASK_STATES, unfinished) as string[];
    out.set(m[1]!, states);
  }
  return out;
}

describe("bulk actions: one list of (action, state) pairs", () => {
  it("the dashboard's single-task actions apply to exactly the states the server's bulk actions take", () => {
    const actions = dashboardActions();
    expect([...actions.keys()].sort()).toEqual(["archive", "cancel", "delete", "retry", "run"]);
    for (const [action, states] of Object.entries(BULK_ACTION_STATES)) {
      expect([...actions.get(action)!].sort(), action).toEqual([...states].sort());
    }
  });
});
