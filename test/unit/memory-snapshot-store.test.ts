/**
 * The in-memory SnapshotStore's injected failures, which the contract test
 * (test/cluster/snapshot-store-contract.test.ts) does not reach: an outage refuses
 * everything and stores nothing; a landing outage stores a put it rejects, as when
 * JetStream stored the snapshot but its acknowledgement was lost.
 */
import { describe, expect, it } from "vitest";
import { MemorySnapshotStore } from "../../src/changelog/memory-snapshot-store.js";

const bytes = (text: string) => new TextEncoder().encode(text);

describe("MemorySnapshotStore outages", () => {
  it("an outage rejects every call and stores nothing", async () => {
    const store = new MemorySnapshotStore();
    await store.put(0, 1, bytes("one"));
    store.startOutage();
    await expect(store.put(0, 2, bytes("two"))).rejects.toThrow(/outage/);
    await expect(store.latest(0)).rejects.toThrow(/outage/);
    await expect(store.seqs(0)).rejects.toThrow(/outage/);
    store.endOutage();
    expect(await store.seqs(0)).toEqual([1]);
  });

  it("a landing outage rejects the put but stores it: a rejected put may have happened", async () => {
    const store = new MemorySnapshotStore();
    await store.put(0, 1, bytes("one"));
    store.startOutage({ landing: true });
    await expect(store.put(0, 2, bytes("two"))).rejects.toThrow(/was stored/);
    store.endOutage();
    expect(await store.latest(0)).toEqual({ seq: 2, bytes: bytes("two") });
    expect(await store.seqs(0)).toEqual([2]);
  });

  it("after close every call rejects", async () => {
    const store = new MemorySnapshotStore();
    await store.close();
    await expect(store.put(0, 1, bytes("x"))).rejects.toThrow(/closed/);
    await expect(store.latest(0)).rejects.toThrow(/closed/);
  });
});
