/**
 * Memory per unfinished task of one queue core, measured in this process (run by
 * bench/scenarios/footprint.ts as `node --expose-gc dist/bench/core-footprint.js N MODE PATH`):
 * V8 heap plus array buffers (the packed columns live in array buffers), after a full GC,
 * before and after `N` plain pending tasks, divided by `N`. No node, no SQLite: the core's
 * own structures only, so the packed index can be compared with entry objects exactly.
 *
 * MODE: `packed` (the default core) or `objects` (`packPending: false`, every task an
 * entry object, as before packing). PATH: `load`, the tasks arrive as activation reads
 * them (rows with strings of their own, as SQLite returns them), or `enqueue`, they are
 * admitted in batches of 1,000 with ids minted the way the server mints them.
 */
import { mintTaskId } from "../src/cluster/task-ids.js";
import { seededRandom } from "../src/base/random.js";
import { QueueCore } from "../src/grains/queue/queue-core.js";
import { indexEntry, type NewTask, type TaskIndexEntry } from "../src/grains/queue/task.js";
import { randomUUID } from "node:crypto";

const [n, mode, path] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc || !Number.isInteger(n) || (mode !== "packed" && mode !== "objects") || (path !== "load" && path !== "enqueue")) {
  throw new Error("usage: node --expose-gc dist/bench/core-footprint.js N packed|objects load|enqueue");
}
const NOW = 1_760_000_000_000;
const TYPE = "bench:task";
/** A string of its own, as a row read from SQLite brings (not a shared literal). */
const own = (s: string) => Buffer.from(s, "latin1").toString("latin1");

function used(): number {
  gc!();
  gc!();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

function* rows(count: number): Iterable<TaskIndexEntry> {
  for (let i = 0; i < count; i++) {
    yield indexEntry({
      id: own(randomUUID()), type: own(TYPE), priority: 4, concurrencyKey: own(""), timeoutMs: 0, deadlineAtMs: 0, uniqueKey: own(""),
      maxRetry: 25, backoffBaseMs: 1_000, backoffMaxMs: 60_000, group: "", rules: [],
    }, { state: "pending", seq: i + 1, readyAtMs: NOW - count + i, expiresAtMs: 0, uniqueUntilMs: 0, payloadBytes: 110 });
  }
}

const newTask = (): NewTask => ({
  id: mintTaskId(0, Date.now()), idChosen: false, queue: "q", type: TYPE, payload: new Uint8Array(110), contentType: "application/json", metadata: {},
  priority: 4, maxRetry: 25, timeoutMs: 0, deadlineAtMs: 0, processAtMs: 0, uniqueKey: "", uniqueTtlMs: 0, retentionMs: 86_400_000,
  expiresAtMs: 0, concurrencyKey: "", group: "", backoffBaseMs: 1_000, backoffMaxMs: 60_000, rules: [], ruleError: "",
});

const core = new QueueCore("q", { leaseTtlMs: 30_000, groupDefaults: { maxSize: 100, maxDelayMs: 1_000, graceMs: 1_000 }, packPending: mode === "packed" }, {
  random: seededRandom(1), newId: () => randomUUID(),
});
const before = used();
if (path === "load") {
  core.load(rows(n), { paused: false }, NOW);
  core.drain();
} else {
  for (let i = 0; i < n; i += 1_000) {
    core.enqueue(Array.from({ length: Math.min(1_000, n - i) }, newTask), new Map(), NOW + i, false);
    core.drain();
  }
}
const after = used();
if (core.stats().unfinished !== n) throw new Error(`expected ${n} unfinished tasks, the core holds ${core.stats().unfinished}`);
process.stdout.write(`${JSON.stringify({ n, mode, path, bytesPerTask: (after - before) / n, packed: core.packedTaskIds().length })}\n`);
