/**
 * The shared-rule ledger's decisions, one scenario each: a fresh ledger waits for every
 * member, raises are counted before they are answered, a fair split under contention,
 * taking back from a node that holds more than its share, a lowered limit, and members
 * that left staying counted until they report again (a crash) or dropped by their farewell.
 */
import { describe, expect, it } from "vitest";
import { GrantLedger, fairShares } from "../../src/grains/ledger/grant-ledger.js";
import { NodeGrants } from "../../src/grains/ledger/node-grants.js";

const SLOT = "@r\u0000k";
const report = (node: string, seq: number, held: number, inflight: number, want: number, limit?: number, atMs = 1) =>
  ({ node, seq, slots: [{ slot: SLOT, held, inflight, want, ...(limit === undefined ? {} : { limit, limitSetAtMs: atMs }) }] });

describe("GrantLedger", () => {
  it("grants nothing new until every member has reported, then grants what is free", () => {
    const ledger = new GrantLedger();
    expect(ledger.report(report("a", 1, 0, 0, 4, 4), ["a", "b"])).toEqual([{ slot: SLOT, grant: 0, limit: 4 }]);
    expect(ledger.report({ node: "b", seq: 1, slots: [] }, ["a", "b"])).toEqual([]);
    expect(ledger.report(report("a", 2, 0, 0, 4, 4), ["a", "b"])).toEqual([{ slot: SLOT, grant: 4, limit: 4 }]);
    expect(ledger.countedOf(SLOT)).toBe(4);
  });

  it("counts what another node reports holding (after a move) before it grants", () => {
    const ledger = new GrantLedger();
    ledger.report(report("b", 1, 3, 3, 3, 4), ["a", "b"]);
    expect(ledger.report(report("a", 1, 0, 0, 4, 4), ["a", "b"])).toEqual([{ slot: SLOT, grant: 1, limit: 4 }]);
  });

  it("splits a contended limit fairly and takes back from the node above its share", () => {
    const ledger = new GrantLedger();
    ledger.report(report("a", 1, 0, 0, 4, 4), ["a", "b"]);
    ledger.report({ node: "b", seq: 1, slots: [] }, ["a", "b"]);
    expect(ledger.report(report("a", 2, 0, 0, 4, 4), ["a", "b"])![0]!.grant).toBe(4);
    // b now wants the whole limit too: a is asked down to 2, and b gets nothing until a reports it dropped.
    expect(ledger.report(report("b", 2, 0, 0, 4, 4), ["a", "b"])![0]!.grant).toBe(0);
    expect(ledger.report(report("a", 3, 4, 4, 8, 4), ["a", "b"])![0]!.grant).toBe(2);
    expect(ledger.countedOf(SLOT)).toBe(4);
    // a gave back (held 2) with 2 still running: b's share is free.
    ledger.report(report("a", 4, 2, 2, 6, 4), ["a", "b"]);
    expect(ledger.report(report("b", 3, 0, 0, 4, 4), ["a", "b"])![0]!.grant).toBe(2);
    expect(ledger.countedOf(SLOT)).toBe(4);
  });

  it("takes grant back when the limit is lowered, counting it until the node reports the drop", () => {
    const ledger = new GrantLedger();
    ledger.report(report("a", 1, 0, 0, 4, 4, 1), ["a"]);
    expect(ledger.report(report("a", 2, 0, 0, 4, 4, 1), ["a"])![0]!.grant).toBe(4);
    expect(ledger.report(report("a", 3, 4, 4, 4, 2, 2), ["a"])).toEqual([{ slot: SLOT, grant: 2, limit: 2 }]);
    expect(ledger.countedOf(SLOT)).toBe(4);
  });

  it("takes the newest limit setting of any node, and answers it to every node", () => {
    const ledger = new GrantLedger();
    ledger.report(report("a", 1, 0, 0, 5, 5, 10), ["a", "b"]);
    // b set the key's limit later (its newest task says 2); a's older setting does not undo
    // it, and the two share the 2 evenly.
    expect(ledger.report(report("b", 1, 0, 0, 2, 2, 20), ["a", "b"])).toEqual([{ slot: SLOT, grant: 1, limit: 2 }]);
    expect(ledger.report(report("a", 2, 0, 0, 5, 5, 10), ["a", "b"])).toEqual([{ slot: SLOT, grant: 1, limit: 2 }]);
    expect(ledger.countedOf(SLOT)).toBe(2);
    expect(ledger.limitOf(SLOT)).toBe(2);
  });

  it("ignores a report older than one it took", () => {
    const ledger = new GrantLedger();
    ledger.report(report("a", 2, 0, 0, 1, 1), ["a"]);
    expect(ledger.report(report("a", 1, 0, 0, 1, 1), ["a"])).toBeUndefined();
  });

  it("keeps counting a member that left without a word (crashed: its tasks may still run) until it reports again; its farewell drops it", () => {
    const ledger = new GrantLedger();
    ledger.report(report("a", 1, 0, 0, 4, 4), ["a", "b"]);
    ledger.report(report("b", 1, 2, 2, 2, 4), ["a", "b"]);
    // b is gone from the members: its 2 running tasks still count, so a gets 2, not 4.
    expect(ledger.report(report("a", 2, 0, 0, 4, 4), ["a"])![0]!.grant).toBe(2);
    expect(ledger.countedOf(SLOT)).toBe(4);
    // b back, reporting nothing held (a farewell, or a restart with nothing running): dropped.
    ledger.report({ node: "b", seq: 2, slots: [] }, ["a", "b"]);
    expect(ledger.countedOf(SLOT)).toBe(2);
    expect(ledger.report(report("a", 3, 2, 2, 4, 4), ["a", "b"])![0]!.grant).toBe(4);
  });

  it("fairShares water-fills: small wants are met, the rest split evenly", () => {
    expect(fairShares(10, new Map([["a", { want: 2 }], ["b", { want: 20 }], ["c", { want: 20 }]]))).toEqual(new Map([["a", 2], ["b", 4], ["c", 4]]));
    expect(fairShares(3, new Map([["a", { want: 5 }], ["b", { want: 5 }]]))).toEqual(new Map([["a", 1], ["b", 2]]));
  });
});

describe("NodeGrants", () => {
  it("admits nothing on a limited slot before a grant, then up to the grant; wakes on a raise", () => {
    const grants = new NodeGrants();
    expect(grants.admissionLimitOf(SLOT)).toBeUndefined();
    grants.declare(SLOT, 3, 10);
    expect(grants.admissionLimitOf(SLOT)).toBe(0);
    expect(grants.report([SLOT], () => 0, () => true)).toEqual([{ slot: SLOT, held: 0, inflight: 0, want: 3, limit: 3, limitSetAtMs: 10 }]);
    expect(grants.apply([{ slot: SLOT, grant: 2, limit: 3 }])).toEqual([SLOT]);
    expect(grants.admissionLimitOf(SLOT)).toBe(2);
    expect(grants.apply([{ slot: SLOT, grant: 1, limit: 3 }])).toEqual([]);
    expect(grants.report([SLOT], () => 0, () => false)).toEqual([{ slot: SLOT, held: 1, inflight: 0, want: 0, limit: 3, limitSetAtMs: 10 }]);
  });
});
