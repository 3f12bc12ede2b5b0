/**
 * ClusterRules on the in-memory coordination (the contract suite keeps it honest against
 * etcd) with real RuleRegistries on real SQLite files: a node follows another's writes,
 * mirrors them into its table, re-reads the whole set after its watch ends compacted, and
 * a write made against a stale cache is refused by the store and validated again.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { WatchCompactedError, type TypeRulesChange, type Watch } from "../../src/cluster/coordination.js";
import { MemoryCoordination, MemoryEtcd } from "../../src/cluster/memory-coordination.js";
import type { RuleDef } from "../../src/grains/queue/rules.js";
import { ClusterRules, type RulesCoordination } from "../../src/server/rules/cluster-rules.js";
import { RuleRegistry } from "../../src/server/rules/rule-registry.js";
import { Database } from "../../src/storage/database.js";
import { SqliteRuleStore } from "../../src/storage/rule-store.js";
import { FakeClock } from "../support/fake-clock.js";

const quiet = { info: () => {}, warn: () => {}, error: () => {} };
const rule = (name = "", expression = "input.k"): RuleDef => ({ name, expression, maxRuns: 1, maxRunsExpression: "", strategy: "GROUP_ROUND_ROBIN" });

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** A node's rules: its SQLite file, its registry, its ClusterRules on its own client of the shared store. */
function node(store: MemoryEtcd, clock: FakeClock, coordination: RulesCoordination = new MemoryCoordination(store, "c", clock)) {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-rules-"));
  const db = new Database({ path: join(dir, "conveyor.db"), synchronous: "normal" });
  const stored = new SqliteRuleStore(db);
  const registry = new RuleRegistry(stored, () => clock.nowMs());
  const rules = new ClusterRules({ registry, clock, logger: quiet, rewatchMs: 100, catchUpMs: 500 });
  cleanups.push(() => {
    void rules.stop();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { registry, rules, stored, start: () => rules.start(coordination, clock.nowMs() + 10_000) };
}

/** Awaits `p`, moving the fake clock (the memory store answers after its latency, on the clock). */
async function run<T>(clock: FakeClock, p: Promise<T>): Promise<T> {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  for (let i = 0; !done; i++) {
    if (i > 10_000) throw new Error("a call never settled");
    clock.advance(1);
    await new Promise((r) => setImmediate(r));
  }
  return p;
}

const typesOf = (r: RuleRegistry) => r.list().map((t) => `${t.type}:${t.source}:${t.rules.map((x) => x.name || x.expression).join(",")}`);

describe("ClusterRules", () => {
  it("a node follows another's writes into its registry and its SQLite mirror; the writer's own cache holds a write when it answers", async () => {
    const clock = new FakeClock();
    const store = new MemoryEtcd(clock);
    const a = node(store, clock);
    const b = node(store, clock);
    await run(clock, a.start());
    await run(clock, b.start());
    await run(clock, a.rules.set("mail", [rule()], "operator"));
    expect(typesOf(a.registry)).toEqual(["mail:operator:input.k"]);
    await run(clock, a.rules.registerAll([{ type: "sms", rules: [rule("", "input.to")], field: "types[0].concurrency" }]));
    await run(clock, a.rules.delete("mail"));
    await run(clock, new Promise((r) => setImmediate(r)));
    expect(typesOf(b.registry)).toEqual(["sms:worker:input.to"]);
    expect(b.stored.loadAll().map((t) => t.type)).toEqual(["sms"]);
  });

  it("a node whose watch ended compacted reads the whole set again, and its SQLite mirror drops what the cluster deleted meanwhile", async () => {
    const clock = new FakeClock();
    const store = new MemoryEtcd(clock);
    // B's client: its watch can be cut (a lost stream) and then ended as compacted.
    const inner = new MemoryCoordination(store, "c", clock);
    let end: ((err: Error) => void) | undefined;
    let live: Watch | undefined;
    const cuttable: RulesCoordination = {
      typeRules: () => inner.typeRules(),
      writeTypeRules: (w, v) => inner.writeTypeRules(w, v),
      watchTypeRules: async (from, onChange: (c: TypeRulesChange) => void, onError) => {
        live = await inner.watchTypeRules(from, onChange, onError);
        end = onError;
        return live;
      },
    };
    const a = node(store, clock);
    const b = node(store, clock, cuttable);
    await run(clock, a.start());
    await run(clock, a.rules.set("old", [rule()], "operator"));
    await run(clock, b.start());
    expect(typesOf(b.registry)).toEqual(["old:operator:input.k"]);

    await live!.cancel(); // the stream is lost: B sees nothing of what follows
    await run(clock, a.rules.set("new", [rule("", "input.n")], "operator"));
    await run(clock, a.rules.delete("old"));
    expect(typesOf(b.registry)).toEqual(["old:operator:input.k"]);
    store.compact(store.revision);
    end!(new WatchCompactedError("compacted"));
    for (let i = 0; i < 50 && typesOf(b.registry).join() !== "new:operator:input.n"; i++) await run(clock, new Promise((r) => setImmediate(r)));
    expect(typesOf(b.registry)).toEqual(["new:operator:input.n"]);
    expect(b.stored.loadAll().map((t) => t.type)).toEqual(["new"]);
  });

  it("a write validated against a stale cache is refused by the store, validated again against the new set, and refused with the registry's error", async () => {
    const clock = new FakeClock();
    const store = new MemoryEtcd(clock);
    // B never hears of A's writes through its watch (a watch that delivers nothing), so its cache is stale.
    const inner = new MemoryCoordination(store, "c", clock);
    const deaf: RulesCoordination = {
      typeRules: () => inner.typeRules(),
      writeTypeRules: (w, v) => inner.writeTypeRules(w, v),
      watchTypeRules: async () => ({ cancel: async () => {} }),
    };
    const a = node(store, clock);
    const b = node(store, clock, deaf);
    await run(clock, a.start());
    await run(clock, b.start());
    await run(clock, a.rules.set("p", [rule("u"), rule("v")], "operator"));
    const version = (await run(clock, inner.typeRules())).version;
    // B's cache says the set is empty, so "q" (v then u) passes its first validation; etcd refuses the stale version.
    const err = await run(clock, b.rules.set("q", [rule("v"), rule("u")], "operator").then(() => undefined, (e: unknown) => e));
    expect(err).toMatchObject({ code: "INVALID_ARGUMENT", field: "rules" });
    expect((await run(clock, inner.typeRules())).version).toBe(version);
    // The re-read brought B up to date.
    expect(typesOf(b.registry)).toEqual(["p:operator:u,v"]);
    // A valid write from B now goes through at the version it read.
    await run(clock, b.rules.set("r", [rule()], "operator"));
    expect((await run(clock, inner.typeRules())).entries.map((e) => e.type)).toEqual(["p", "r"]);
  });
});
