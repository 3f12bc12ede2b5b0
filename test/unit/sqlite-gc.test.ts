/**
 * better-sqlite3 12 derives its Statement from node::ObjectWrap. Compiled against Node
 * 24.19+ headers, ObjectWrap's destructor removes an environment cleanup hook, and on
 * Node 24.19-24.21 that aborted the process whenever the garbage collector freed a
 * Statement while no JavaScript context was entered (a GC run by V8 between callbacks):
 * `Assertion failed: (env) != nullptr` in node::RemoveEnvironmentCleanupHook
 * (nodejs/node#65446). The loop below aborts on 24.21.0 within its first rounds;
 * .ci/run runs this file on Node 24, so a runtime with the bug fails CI at once.
 * On Node 20 and 22 it simply passes.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/node-process.js";

const SCRIPT = `
const Database = require("better-sqlite3");
const db = new Database(":memory:");
let rounds = 0;
(function round() {
  let garbage = [];
  for (let i = 0; i < 5000; i++) garbage.push(db.prepare("SELECT ? AS v"), new Array(50).fill(i));
  garbage = null;
  if (++rounds < 30) setImmediate(round); else console.log("done", rounds);
})();
`;

describe("better-sqlite3 under this Node", () => {
  it("survives the garbage collector freeing many statements between callbacks (nodejs/node#65446)", () => {
    const run = spawnSync(process.execPath, ["-e", SCRIPT], { cwd: REPO_ROOT, encoding: "utf8", timeout: 25_000 });
    expect({ status: run.status, signal: run.signal, stdout: run.stdout.trim(), stderr: run.stderr.split("\n").slice(0, 3).join("\n") })
      .toEqual({ status: 0, signal: null, stdout: "done 30", stderr: "" });
  });
});
