/**
 * Server-made task ids (cluster/task-ids.ts): UUID-shaped, carrying their partition, and
 * sorting by the instant they were minted (what keeps a new task's index entries on the
 * last B-tree pages).
 */
import { describe, expect, it } from "vitest";
import { mintTaskId, partitionHint } from "../../src/cluster/task-ids.js";

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const NOW = 1_764_633_600_000; // 2025-12-02

describe("mintTaskId", () => {
  it("has a version-4 UUID's shape and names its partition", () => {
    for (const p of [0, 1, 255, 4095]) {
      const id = mintTaskId(p, NOW);
      expect(id).toMatch(UUID_V4);
      expect(partitionHint(id, 4096)).toBe(p);
    }
  });

  it("sorts by the minting instant within a partition, at ms resolution", () => {
    const instants = [0, 1, NOW - 1, NOW, NOW + 1, NOW + 86_400_000, 2 ** 44 - 1];
    const ids = instants.map((t) => mintTaskId(7, t));
    expect([...ids].sort()).toEqual(ids);
  });

  it("stays unique within one ms (62 random bits)", () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => mintTaskId(3, NOW)));
    expect(ids.size).toBe(10_000);
  });
});
