/**
 * The enqueue coalescer over a fake transport whose calls the test answers by hand: when
 * calls go out (at the end of the turn; while one is in flight, after it returns; a full
 * batch at once), that each caller gets its own outcome in order, the bounds, groups, and
 * what a whole-batch failure does (a refusal before work: each call again alone; any
 * other: every member fails with it). No timers: a "turn" is one setImmediate.
 */
import { describe, expect, it } from "vitest";
import { ConveyorError } from "../../src/base/errors.js";
import { EnqueueCoalescer, type CoalescerTransport } from "../../src/sdk/enqueue-coalescer.js";

/** One event-loop turn: what the coalescer waits for before it sends. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Sent {
  kind: "one" | "batch";
  items: string[];
  answer(outcomes?: Array<string | Error>): void;
  fail(error: unknown): void;
}

/** Items are strings; an item's result is "ok:<item>" unless the test answers otherwise. */
function fakeTransport(refused: (e: unknown) => boolean = () => false) {
  const sent: Sent[] = [];
  const call = (kind: "one" | "batch", items: string[]) => new Promise<unknown>((resolve, reject) => {
    sent.push({
      kind, items,
      answer: (outcomes = items.map((i) => `ok:${i}`)) => resolve(kind === "one" ? outcomes[0] : outcomes),
      fail: reject,
    });
  });
  const transport: CoalescerTransport<string, string> = {
    one: async (item) => {
      const r = await call("one", [item]);
      if (r instanceof Error) throw r;
      return r as string;
    },
    batch: (items) => call("batch", [...items]) as Promise<Array<string | Error>>,
    refusedBeforeWork: refused,
  };
  return { sent, transport };
}

/** Bounds for a test: pure Nagle (one send in flight) unless `inFlightMax` says otherwise. */
const limits = (countMax = 1000, bytesMax = 1_000_000, inFlightMax = 1) => ({ countMax, bytesMax, bytesOf: (s: string) => s.length, inFlightMax });

/** Settles each promise into its value or its error's message, for comparing outcomes. */
const settle = (ps: Array<Promise<string>>) => Promise.all(ps.map((p) => p.then((v) => v, (e: Error) => `error:${e.message}`)));

describe("enqueue coalescer", () => {
  it("sends a lone call alone at the end of its turn, with nothing in flight (no added latency)", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits());
    const p = c.add("a");
    expect(sent).toHaveLength(0); // not in the caller's own stack
    await nextTurn();
    expect(sent.map((s) => [s.kind, s.items])).toEqual([["one", ["a"]]]);
    sent[0]!.answer();
    expect(await p).toBe("ok:a");
    // The next lone call, made after the answer, goes out in its own turn too.
    const q = c.add("b");
    await nextTurn();
    expect(sent.map((s) => s.items)).toEqual([["a"], ["b"]]);
    sent[1]!.answer();
    expect(await q).toBe("ok:b");
  });

  it("sends the calls of one turn as one batch, each caller getting its own outcome in order", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits());
    const ps = ["a", "b", "c", "d"].map((x) => c.add(x));
    await nextTurn();
    expect(sent.map((s) => [s.kind, s.items])).toEqual([["batch", ["a", "b", "c", "d"]]]);
    sent[0]!.answer(["ok:a", new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", "task.priority: bad", "task.priority"), "ok:c", "ok:d"]);
    expect(await settle(ps)).toEqual(["ok:a", "error:task.priority: bad", "ok:c", "ok:d"]);
    const error = await ps[1]!.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConveyorError);
    expect(error).toMatchObject({ code: "INVALID_ARGUMENT", reason: "INVALID_FIELD", field: "task.priority" });
  });

  it("while a send is in flight, collects later calls and sends them together when it returns", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits());
    const first = c.add("a");
    await nextTurn();
    const later = [c.add("b")];
    await nextTurn();
    later.push(c.add("c"));
    await nextTurn();
    later.push(c.add("d"));
    await nextTurn();
    expect(sent).toHaveLength(1); // b, c, d wait for a
    sent[0]!.answer();
    expect(await first).toBe("ok:a");
    await nextTurn();
    expect(sent.map((s) => [s.kind, s.items])).toEqual([["one", ["a"]], ["batch", ["b", "c", "d"]]]);
    sent[1]!.answer();
    expect(await settle(later)).toEqual(["ok:b", "ok:c", "ok:d"]);
  });

  it("with two sends allowed in flight, a second turn's calls go at once and a third turn's wait", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits(1000, 1_000_000, 2));
    const ps = [c.add("a")];
    await nextTurn();
    ps.push(c.add("b"), c.add("c"));
    await nextTurn();
    ps.push(c.add("d"), c.add("e"));
    await nextTurn();
    expect(sent.map((s) => s.items)).toEqual([["a"], ["b", "c"]]);
    sent[1]!.answer();
    await ps[1];
    await nextTurn();
    expect(sent.map((s) => s.items).slice(2)).toEqual([["d", "e"]]);
    sent[0]!.answer();
    sent[2]!.answer();
    expect(await settle(ps)).toEqual(["ok:a", "ok:b", "ok:c", "ok:d", "ok:e"]);
  });

  it("calls made by callers as their answers arrive join the calls collected meanwhile", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits());
    const a1 = c.add("a");
    const a = a1.then(() => c.add("a2"));
    await nextTurn();
    const b = c.add("b");
    sent[0]!.answer();
    await a1;
    await nextTurn();
    expect(sent.map((s) => s.items)).toEqual([["a"], ["b", "a2"]]);
    sent[1]!.answer();
    expect(await settle([a, b])).toEqual(["ok:a2", "ok:b"]);
  });

  it("splits at the count bound; a full batch goes out at once even while one is in flight", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits(3));
    const ps = ["a", "b", "c", "d", "e", "f", "g"].map((x) => c.add(x));
    await nextTurn();
    // Nothing was in flight: everything goes, in bounded chunks.
    expect(sent.map((s) => s.items)).toEqual([["a", "b", "c"], ["d", "e", "f"], ["g"]]);
    // In flight now: two more wait; a third fills a batch, which goes without waiting.
    const more = ["h", "i"].map((x) => c.add(x));
    await nextTurn();
    expect(sent).toHaveLength(3);
    more.push(c.add("j"));
    await nextTurn();
    expect(sent.map((s) => s.items).slice(3)).toEqual([["h", "i", "j"]]);
    for (const s of sent) s.answer();
    expect(await settle([...ps, ...more])).toEqual(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"].map((x) => `ok:${x}`));
  });

  it("splits at the bytes bound, and a call larger than the bound goes alone (the node judges it)", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits(1000, 10));
    const ps = ["aaaa", "bbbb", "cccc", "x".repeat(25), "dd"].map((x) => c.add(x));
    await nextTurn();
    expect(sent.map((s) => [s.kind, s.items.map((i) => i.length)])).toEqual([["batch", [4, 4]], ["one", [4]], ["one", [25]], ["one", [2]]]);
    for (const s of sent) s.answer();
    expect((await settle(ps)).every((r) => r.startsWith("ok:"))).toBe(true);
  });

  it("groups: only calls of one group share a batch, and each group waits only for its own sends", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits());
    const ps = [c.add("a1", "A"), c.add("b1", "B"), c.add("a2", "A"), c.add("b2", "B")];
    await nextTurn();
    expect(sent.map((s) => s.items)).toEqual([["a1", "a2"], ["b1", "b2"]]);
    sent[0]!.answer();
    await ps[0];
    // A returned, B is still in flight: a call of A goes at once, one of B waits.
    ps.push(c.add("a3", "A"), c.add("b3", "B"));
    await nextTurn();
    expect(sent.map((s) => s.items).slice(2)).toEqual([["a3"]]);
    sent[1]!.answer();
    await ps[1];
    await nextTurn();
    expect(sent.map((s) => s.items).slice(3)).toEqual([["b3"]]);
    sent[2]!.answer();
    sent[3]!.answer();
    expect(await settle(ps)).toEqual(["ok:a1", "ok:b1", "ok:a2", "ok:b2", "ok:a3", "ok:b3"]);
  });

  it("a whole-batch refusal before any work sends each call again alone, each getting its own answer", async () => {
    const refusal = (e: unknown) => e instanceof ConveyorError && e.code === "PERMISSION_DENIED";
    const { sent, transport } = fakeTransport(refusal);
    const c = new EnqueueCoalescer(transport, limits());
    const ps = ["mine-1", "theirs", "mine-2"].map((x) => c.add(x));
    await nextTurn();
    sent[0]!.fail(new ConveyorError("PERMISSION_DENIED", "QUEUE_NOT_IN_SCOPE", "may not touch queue theirs (EnqueueBatch)"));
    await nextTurn();
    expect(sent.slice(1).map((s) => [s.kind, s.items])).toEqual([["one", ["mine-1"]], ["one", ["theirs"]], ["one", ["mine-2"]]]);
    sent[1]!.answer();
    sent[2]!.fail(new ConveyorError("PERMISSION_DENIED", "QUEUE_NOT_IN_SCOPE", "may not touch queue theirs (Enqueue)"));
    sent[3]!.answer();
    expect(await settle(ps)).toEqual(["ok:mine-1", "error:may not touch queue theirs (Enqueue)", "ok:mine-2"]);
  });

  it("any other whole-batch failure fails every member with it, and sends nothing again (it may have been stored)", async () => {
    const { sent, transport } = fakeTransport(() => false);
    const c = new EnqueueCoalescer(transport, limits());
    const ps = ["a", "b"].map((x) => c.add(x));
    await nextTurn();
    sent[0]!.fail(new ConveyorError("UNAVAILABLE", "UNREACHABLE", "node unreachable"));
    expect(await settle(ps)).toEqual(["error:node unreachable", "error:node unreachable"]);
    await nextTurn();
    expect(sent).toHaveLength(1);
    // The coalescer is idle again: a retry goes out at once.
    const retry = c.add("a");
    await nextTurn();
    expect(sent.map((s) => s.items)).toEqual([["a", "b"], ["a"]]);
    sent[1]!.answer();
    expect(await retry).toBe("ok:a");
  });

  it("an answer with fewer items than the batch fails the missing ones with INTERNAL, not silence", async () => {
    const { sent, transport } = fakeTransport();
    const c = new EnqueueCoalescer(transport, limits());
    const ps = ["a", "b"].map((x) => c.add(x));
    await nextTurn();
    sent[0]!.answer(["ok:a"]);
    expect(await ps[0]).toBe("ok:a");
    await expect(ps[1]).rejects.toMatchObject({ code: "INTERNAL", reason: "INTERNAL" });
  });
});
